package manifest

import (
	"bytes"
	"encoding/json"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// ParseList decodes what a staticPodURL serves, as upstream accepts it:
// one Pod, or a v1 PodList whose items are each read as a Pod manifest
// (their apiVersion and kind may be left out). Every pod gets the static
// identity described by o. A list is all or nothing: one bad item rejects
// it, its problems prefixed with the item's path. An empty list is valid.
// Any error is an *Error.
func ParseList(data []byte, o Options) (pods []*v1.Pod, err error) {
	defer func() {
		if r := recover(); r != nil {
			pods, err = nil, problem(0, "", "manifest could not be decoded: %v", r)
		}
	}()
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, problem(0, "", "manifest is empty")
	}
	js := trimmed
	if trimmed[0] != '{' {
		var err error
		if js, err = yaml.YAMLToJSON(data); err != nil {
			p := yamlProblem(err)
			return nil, &Error{Problems: []Problem{p}}
		}
	}
	var head struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Items      []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(js, &head); err != nil || head.Kind != "PodList" {
		// Not a list: a single Pod, with its own checks and messages.
		pod, err := Parse(data, o)
		if err != nil {
			return nil, err
		}
		return []*v1.Pod{pod}, nil
	}
	if head.APIVersion != "v1" {
		return nil, problem(0, "apiVersion", "must be \"v1\", got %q", head.APIVersion)
	}
	var all Error
	warn := o.Warn
	for i, raw := range head.Items {
		prefix := fmt.Sprintf("items[%d]", i)
		item := map[string]json.RawMessage{}
		if err := json.Unmarshal(raw, &item); err != nil {
			all.Problems = append(all.Problems, Problem{Field: prefix, Detail: "must be an object holding a Pod"})
			continue
		}
		// A list's items are typed by the list, as upstream decodes them,
		// whatever they say; what they say is kept for the UID, as
		// upstream's conversion of a list keeps it.
		var tm metav1.TypeMeta
		if err := typeField(item, "apiVersion", &tm.APIVersion); err != nil {
			all.Problems = append(all.Problems, Problem{Field: prefix + ".apiVersion", Detail: err.Error()})
			continue
		}
		if err := typeField(item, "kind", &tm.Kind); err != nil {
			all.Problems = append(all.Problems, Problem{Field: prefix + ".kind", Detail: err.Error()})
			continue
		}
		item["apiVersion"], item["kind"] = json.RawMessage(`"v1"`), json.RawMessage(`"Pod"`)
		itemJS, err := json.Marshal(item)
		if err != nil {
			all.Problems = append(all.Problems, Problem{Field: prefix, Detail: err.Error()})
			continue
		}
		io := o
		if warn != nil {
			io.Warn = func(p Problem) { warn(itemProblem(prefix, p)) }
		}
		pod, err := parse(itemJS, io, tm)
		if err != nil {
			if me, ok := err.(*Error); ok {
				for _, p := range me.Problems {
					all.Problems = append(all.Problems, itemProblem(prefix, p))
				}
			} else {
				all.Problems = append(all.Problems, Problem{Field: prefix, Detail: err.Error()})
			}
			continue
		}
		pods = append(pods, pod)
	}
	if len(all.Problems) > 0 {
		return nil, &all
	}
	return pods, nil
}

// itemProblem places a problem of a list item under the item's path; the
// item's own line numbers do not apply to the list's text.
func itemProblem(prefix string, p Problem) Problem {
	p.Line = 0
	if p.Field == "" {
		p.Field = prefix
	} else {
		p.Field = prefix + "." + p.Field
	}
	return p
}
