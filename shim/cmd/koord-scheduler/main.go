// Command koord-scheduler is Koordinator v1.8.0's scheduler with gangstate's shim in place of
// the Coscheduling plugin (same plugin name, same configuration). The plugin list is the one of
// Koordinator's own cmd/koord-scheduler/main.go at v1.8.0 (lines 45-56), with coscheduling.New
// replaced by gangshim.New. Configuration of the shim: environment variables, see docs/shim.md.
package main

import (
	"math/rand"
	"os"
	"time"

	"k8s.io/component-base/logs"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"github.com/koordinator-sh/koordinator/cmd/koord-scheduler/app"
	"github.com/koordinator-sh/koordinator/pkg/scheduler/plugins/defaultprebind"
	"github.com/koordinator-sh/koordinator/pkg/scheduler/plugins/deviceshare"
	"github.com/koordinator-sh/koordinator/pkg/scheduler/plugins/elasticquota"
	"github.com/koordinator-sh/koordinator/pkg/scheduler/plugins/loadaware"
	"github.com/koordinator-sh/koordinator/pkg/scheduler/plugins/nodenumaresource"
	noderesourcesfitplus "github.com/koordinator-sh/koordinator/pkg/scheduler/plugins/noderesourcefitplus"
	"github.com/koordinator-sh/koordinator/pkg/scheduler/plugins/reservation"
	"github.com/koordinator-sh/koordinator/pkg/scheduler/plugins/scarceresourceavoidance"
	"github.com/koordinator-sh/koordinator/pkg/scheduler/plugins/schedulinghint"

	// Ensure metric package is initialized
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	// Ensure scheme package is initialized.
	_ "github.com/koordinator-sh/koordinator/pkg/scheduler/apis/config/scheme"

	"gangstate.local/shim/gangshim"
)

var plugins = map[string]frameworkruntime.PluginFactory{
	loadaware.Name:               loadaware.New,
	nodenumaresource.Name:        nodenumaresource.New,
	reservation.Name:             reservation.New,
	gangshim.Name:                gangshim.New,
	deviceshare.Name:             deviceshare.New,
	elasticquota.Name:            elasticquota.New,
	defaultprebind.Name:          defaultprebind.New,
	noderesourcesfitplus.Name:    noderesourcesfitplus.New,
	scarceresourceavoidance.Name: scarceresourceavoidance.New,
	schedulinghint.Name:          schedulinghint.New,
}

func main() {
	rand.Seed(time.Now().UnixNano()) //nolint:staticcheck // as Koordinator's main does
	options := make([]app.Option, 0, len(plugins))
	for name, factory := range plugins {
		options = append(options, app.WithPlugin(name, factory))
	}
	command := app.NewSchedulerCommand(options...)
	logs.InitLogs()
	defer logs.FlushLogs()
	if err := command.Execute(); err != nil {
		os.Exit(1)
	}
}
