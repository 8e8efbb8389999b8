package agent

import (
	v1 "k8s.io/api/core/v1"

	"github.com/heartlet/heartlet/internal/journal"
	"github.com/heartlet/heartlet/internal/server"
)

// journalLookup finds a pod's journal by namespace and name among the pods
// of each list in turn (the desired pods, then those with a status, which
// include rejected and terminated ones).
func journalLookup(j *journal.Journal, lists ...func() []*v1.Pod) server.JournalLookup {
	return func(namespace, name string) (journal.PodJournal, bool) {
		for _, list := range lists {
			for _, p := range list() {
				if p.Namespace == namespace && p.Name == name {
					return journal.PodJournal{Namespace: namespace, Name: name, UID: p.UID, Now: j.Now(), Entries: j.Entries(p.UID)}, true
				}
			}
		}
		return journal.PodJournal{}, false
	}
}

// desiredPods are the desired pods once the sources are built, shared:
// a journal lookup reads three fields of each and copies none.
func (c *components) desiredPods() []*v1.Pod {
	if c.desired == nil {
		return nil
	}
	return c.desired.SharedPods()
}
