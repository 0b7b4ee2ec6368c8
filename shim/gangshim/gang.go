package gangshim

import (
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	fwktype "k8s.io/kube-scheduler/framework"

	"github.com/koordinator-sh/koordinator/pkg/scheduler/frameworkext"
	"github.com/koordinator-sh/koordinator/pkg/scheduler/plugins/coscheduling/util"
)

// member is a pod as the shim sees it in Koordinator's gang cache: its gang id, its gang
// group's id and gang ids (empty for a pod that is no gang member).
type member struct {
	pod   *v1.Pod
	key   string   // ns/name
	gang  string   // gang id ("" = no gang member)
	group string   // gang group id (util.GetGangGroupId)
	gangs []string // the gang ids of the group
}

func (m member) isGang() bool { return m.gang != "" }

// memberOf finds pod's gang and gang group in Koordinator's gang cache (a gang not in the
// cache is a group of its own).
func (s *Shim) memberOf(pod *v1.Pod) member {
	m := member{pod: pod, key: util.GetId(pod.Namespace, pod.Name)}
	if !util.IsPodNeedGang(pod) {
		return m
	}
	m.gang = util.GetId(pod.Namespace, util.GetGangNameByPod(pod))
	m.group, m.gangs = m.gang, []string{m.gang}
	if sum, ok := s.mgr.GetGangSummary(m.gang); ok && sum != nil && len(sum.GangGroup) > 0 {
		m.gangs = sum.GangGroup
		m.group = util.GetGangGroupId(sum.GangGroup)
	}
	return m
}

// cycle is the scheduling queue's cycle counter (0 without an extended handle's scheduler).
func (s *Shim) cycle() int64 {
	if ext, ok := s.handle.(frameworkext.ExtendedHandle); ok && ext.Scheduler() != nil {
		return ext.Scheduler().GetSchedulingQueue().SchedulingCycle()
	}
	return 0
}

// representative is the group's representative in Koordinator's gang cache ("" = none), found
// with GangGroupInfo.IsRepresentative (K core/ganggroup.go:169-174) over the group's children.
func (s *Shim) representative(group []string) string {
	for _, gangID := range group {
		sum, ok := s.mgr.GetGangSummary(gangID)
		if !ok || sum == nil || sum.GangGroupInfo == nil {
			continue
		}
		for key := range sum.Children {
			if sum.GangGroupInfo.IsRepresentative(podOfKey(key)) {
				return key
			}
		}
	}
	return ""
}

// pending lists the group's pending members (ns/name, sorted) and their pods.
func (s *Shim) pending(group []string) ([]string, map[string]*v1.Pod) {
	pods := map[string]*v1.Pod{}
	for _, gangID := range group {
		for _, p := range s.mgr.GetAllPodsFromGang(gangID) {
			if p.Spec.NodeName == "" && p.DeletionTimestamp == nil {
				pods[util.GetId(p.Namespace, p.Name)] = p
			}
		}
	}
	keys := make([]string, 0, len(pods))
	for k := range pods {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys, pods
}

// inCache tells whether any gang of group is still in Koordinator's gang cache (the cache drops
// a gang when its PodGroup is deleted or, for a gang of annotations, its last pod:
// K core/gang_cache.go:189-223, 295-323).
func (s *Shim) inCache(group []string) bool {
	for _, gangID := range group {
		if _, ok := s.mgr.GetGangSummary(gangID); ok {
			return true
		}
	}
	return false
}

func podOfKey(key string) *v1.Pod {
	ns, name, _ := strings.Cut(key, "/")
	p := &v1.Pod{}
	p.Namespace, p.Name = ns, name
	return p
}

// waitingOf lists the pods of the group's gangs waiting at Permit (none for no gang).
func (s *Shim) waitingOf(group []string) []*v1.Pod {
	if len(group) == 0 {
		return nil
	}
	in := map[string]bool{}
	for _, g := range group {
		in[g] = true
	}
	var out []*v1.Pod
	s.handle.IterateOverWaitingPods(func(wp fwktype.WaitingPod) {
		p := wp.GetPod()
		if util.IsPodNeedGang(p) && in[util.GetId(p.Namespace, util.GetGangNameByPod(p))] {
			out = append(out, p)
		}
	})
	return out
}

// splitGroup lists the gang ids of a gang group id (util.GetGangGroupId joins them with ","),
// skipping empty ones.
func splitGroup(id string) []string {
	return strings.FieldsFunc(id, func(r rune) bool { return r == ',' })
}
