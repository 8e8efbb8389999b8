package admission

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FuzzNodeAffinity feeds arbitrary node labels, node selectors and node
// selector requirements (any operator, key and values, label or field) to
// Admit: it must never panic, and a refusal always carries a reason and a
// message.
func FuzzNodeAffinity(f *testing.F) {
	f.Add("zone", "a", "zone", "In", "a,b", false, "node-a", "zone", "a")
	f.Add("cores", "8", "cores", "Gt", "4", false, "node-a", "", "")
	f.Add("cores", "x", "cores", "Lt", "not-a-number", false, "node-a", "", "")
	f.Add("", "", "metadata.name", "In", "node-a", true, "node-a", "", "")
	f.Add("k", "v", "metadata.name", "NotIn", "", true, "", "k", "")
	f.Add("a/b/c", "!", "a/b/c", "Exists", "x,y", false, "n", "a/b/c", "!")
	f.Add("k", "v", "k", "DoesNotExist", "", false, "n", "", "")
	f.Add("k", "v", "", "Bogus", ",,,", true, "n", "", "")

	f.Fuzz(func(t *testing.T, labelKey, labelValue, reqKey, op, values string, field bool, nodeName, selKey, selValue string) {
		node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName, Labels: map[string]string{labelKey: labelValue}}}
		r := v1.NodeSelectorRequirement{Key: reqKey, Operator: v1.NodeSelectorOperator(op)}
		if values != "" {
			r.Values = strings.Split(values, ",")
		}
		term := v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{r}}
		if field {
			term = v1.NodeSelectorTerm{MatchFields: []v1.NodeSelectorRequirement{r}}
		}
		pod := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "p"},
			Spec: v1.PodSpec{
				Containers: []v1.Container{{Name: "c"}},
				Affinity: &v1.Affinity{NodeAffinity: &v1.NodeAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
						NodeSelectorTerms: []v1.NodeSelectorTerm{term, {}},
					},
				}},
			},
		}
		if selKey != "" {
			pod.Spec.NodeSelector = map[string]string{selKey: selValue}
		}
		got := Admit(pod, node, nil, nil, 0)
		if !got.Admit && (got.Reason == "" || got.Message == "") {
			t.Fatalf("refusal without reason or message: %+v", got)
		}
		if got.Admit {
			return
		}
		if got.Reason != ReasonNodeAffinity {
			t.Fatalf("reason %q, want %q (only node affinity can fail here)", got.Reason, ReasonNodeAffinity)
		}
		// Without any constraint the same pod is admitted.
		pod.Spec.Affinity, pod.Spec.NodeSelector = nil, nil
		if got := Admit(pod, node, nil, nil, 0); !got.Admit {
			t.Fatalf("pod without node constraints refused: %+v", got)
		}
	})
}
