package server

import (
	"encoding/json"
	"fmt"
	"net/http"

	"k8s.io/klog/v2"

	"github.com/heartlet/heartlet/internal/journal"
)

// JournalPath is the pattern of a pod's journal (JSON, journal.PodJournal).
const JournalPath = "GET /debug/pods/{namespace}/{name}/journal"

// JournalLookup returns the journal of the pod namespace/name, and false
// when heartlet knows no such pod.
type JournalLookup func(namespace, name string) (journal.PodJournal, bool)

// JournalHandler serves a pod's journal at JournalPath; an unknown pod is
// 404 with a message naming it.
func JournalHandler(lookup JournalLookup) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ns, name := r.PathValue("namespace"), r.PathValue("name")
		pj, ok := journal.PodJournal{}, false
		if lookup != nil {
			pj, ok = lookup(ns, name)
		}
		if !ok {
			http.Error(w, fmt.Sprintf("pod %q not found in namespace %q on this node", name, ns), http.StatusNotFound)
			return
		}
		if pj.Entries == nil {
			pj.Entries = []journal.Entry{}
		}
		data, err := json.Marshal(&pj)
		if err != nil {
			klog.FromContext(r.Context()).Error(err, "Failed to encode pod journal", "pod", klog.KRef(ns, name))
			http.Error(w, "internal server error: encode pod journal", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		_, _ = w.Write(data)
	})
}
