// Package manifest turns the text of one static pod manifest (YAML or JSON)
// into the v1.Pod heartlet runs: decoding, the API server's defaults
// the node agent relies on, the static pod identity (UID, name suffix,
// config annotations) and validation of whatever would make the pod
// impossible to run.
//
// Decoding is as lenient as the upstream kubelet's: an unknown or duplicated
// field anywhere in the Pod does not reject the manifest (upstream ignores
// unknown fields and keeps the last of duplicated ones), but each is handed
// to Options.Warn naming the field and its line, so a typo such as
// "imagePullPolcy" is reported instead of silently ignored. Errors and
// warnings name the line of the manifest where they can be located.
package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/heartlet/heartlet/internal/podconfig"
)

// Options describe where a manifest came from.
type Options struct {
	// NodeName is the name of this node: appended to the pod name, set as
	// spec.nodeName and part of the UID. Required.
	NodeName string
	// Origin is the file path (or URL) of the manifest; part of the UID.
	Origin string
	// Source is the value of the kubernetes.io/config.source annotation,
	// podconfig.SourceFile or podconfig.SourceHTTP; it decides how the UID
	// covers the origin (with the node name for a file, alone for a URL)
	// and whether the pod tolerates every NoExecute taint (a file's does).
	Source string
	// Seen is written as the kubernetes.io/config.seen annotation when not
	// zero. It is not part of the UID.
	Seen time.Time
	// Warn, when not nil, is called for every problem that does not reject
	// the manifest: an unknown field, a field given twice, a priority
	// upstream warns about.
	Warn func(Problem)
}

// Problem is one reason a manifest was rejected.
type Problem struct {
	// Line is the 1-based line of the manifest the problem was found on,
	// 0 when it cannot be located (e.g. a defaulted field).
	Line int
	// Field is the path of the offending field, e.g.
	// spec.containers[0].name; "" when the problem is not about one field.
	Field string
	// Detail says what is wrong.
	Detail string
}

// String formats the problem as "line N: field: detail".
func (p Problem) String() string {
	var b strings.Builder
	if p.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", p.Line)
	}
	if p.Field != "" {
		b.WriteString(p.Field)
		b.WriteString(": ")
	}
	b.WriteString(p.Detail)
	return b.String()
}

// Error is returned for a manifest that cannot be decoded or describes a
// pod that cannot run. It lists every problem found.
type Error struct {
	Problems []Problem
}

// Error joins the problems with "; ".
func (e *Error) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.String()
	}
	return strings.Join(parts, "; ")
}

func problem(line int, fieldPath, format string, args ...any) *Error {
	return &Error{Problems: []Problem{{Line: line, Field: fieldPath, Detail: fmt.Sprintf(format, args...)}}}
}

// Parse decodes one Pod manifest, applies defaults and the static pod
// identity described by o, and validates the result. The returned pod is
// new and owned by the caller. Any error is an *Error.
func Parse(data []byte, o Options) (*v1.Pod, error) {
	return parse(data, o, metav1.TypeMeta{})
}

// parse is Parse with the TypeMeta the UID hash sees: empty for a Pod
// manifest (upstream's conversion to its internal form drops it), the
// item's own for an item of a PodList (upstream's list conversion keeps
// it).
func parse(data []byte, o Options, hashed metav1.TypeMeta) (*v1.Pod, error) {
	if o.NodeName == "" {
		return nil, problem(0, "", "node name is empty")
	}
	pod, loc, warnings, err := Decode(data)
	if err != nil {
		return nil, err
	}
	if o.Warn != nil {
		for _, w := range warnings {
			o.Warn(w)
		}
	}
	name := pod.Name
	SetDefaults(pod)
	// As upstream: the UID is a hash of the defaulted pod unless the
	// manifest gives one.
	uid := pod.UID
	if uid == "" {
		uid = uidOf(pod, o, hashed)
	}
	makeStatic(pod, uid, o)
	if errs := validate(pod, name); len(errs) > 0 {
		return nil, loc.toError(errs)
	}
	if w := priorityWarning(&pod.Spec); w != "" && o.Warn != nil {
		o.Warn(Problem{Line: loc.Line("spec.priorityClassName"), Field: "spec.priority", Detail: w})
	}
	// As upstream, after validation: a static pod may not need the API.
	switch what, err := apiReference(pod); {
	case err != nil:
		return nil, problem(0, "", "%v", err)
	case what != "":
		return nil, problem(0, "", "static pods may not reference %s", what)
	}
	return pod, nil
}

// Decode decodes one Pod from YAML or JSON text without defaulting it.
// Unknown and duplicated fields are returned as warnings, as upstream
// tolerates them. The returned locator maps field paths to lines of data
// for error messages. Any error is an *Error.
func Decode(data []byte) (pod *v1.Pod, loc *Locator, warnings []Problem, err error) {
	// The YAML libraries are third-party parsers of untrusted text: a bug
	// in them must reject the file, never stop the node agent.
	defer func() {
		if r := recover(); r != nil {
			pod, loc, warnings, err = nil, nil, nil, problem(0, "", "manifest could not be decoded: %v", r)
		}
	}()
	return decode(data)
}

var (
	yamlLine  = regexp.MustCompile(`line (\d+): (.*)`)
	typeError = regexp.MustCompile(`cannot unmarshal (\S+) into Go struct field [^.\s]+\.(\S+) of type (\S+)`)
)

// yamlProblem turns an error of the YAML library into a Problem with the
// line it names.
func yamlProblem(err error) Problem {
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return Problem{Line: line, Detail: "invalid YAML: " + m[2]}
	}
	msg = strings.TrimPrefix(msg, "error converting YAML to JSON: ")
	return Problem{Detail: "invalid YAML: " + strings.TrimPrefix(msg, "yaml: ")}
}

func decode(data []byte) (*v1.Pod, *Locator, []Problem, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, nil, nil, problem(0, "", "manifest is empty")
	}
	loc, docs := newLocator(data)
	if docs > 1 {
		return nil, loc, nil, problem(0, "", "manifest holds %d YAML documents, want exactly one Pod", docs)
	}

	var warnings []Problem
	js := trimmed
	isJSON := trimmed[0] == '{'
	if !isJSON {
		var err error
		js, err = yaml.YAMLToJSONStrict(data)
		if err != nil {
			// The strict conversion refuses duplicated keys, which
			// upstream's lenient one accepts (the last wins): retry
			// leniently and keep the strict complaint as a warning.
			p := yamlProblem(err)
			lenient, lerr := yaml.YAMLToJSON(data)
			if lerr != nil {
				return nil, loc, nil, &Error{Problems: []Problem{p}}
			}
			js = lenient
			warnings = append(warnings, p)
		}
	}

	var top map[string]json.RawMessage
	if err := json.Unmarshal(js, &top); err != nil {
		if ok, off := sigsjson.SyntaxErrorOffset(err); ok && isJSON {
			return nil, loc, nil, problem(lineAt(data, len(data)-len(bytes.TrimLeft(data, " \t\r\n"))+int(off)), "", "invalid JSON: %s", strings.TrimPrefix(err.Error(), "json: "))
		}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) || string(js) == "null" {
			return nil, loc, nil, problem(0, "", "manifest must be a YAML or JSON object holding one Pod")
		}
		return nil, loc, nil, problem(0, "", "invalid manifest: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	var tm metav1.TypeMeta
	if err := typeField(top, "apiVersion", &tm.APIVersion); err != nil {
		return nil, loc, nil, loc.problem("apiVersion", "%v", err)
	}
	if err := typeField(top, "kind", &tm.Kind); err != nil {
		return nil, loc, nil, loc.problem("kind", "%v", err)
	}
	var e Error
	if tm.APIVersion != "v1" {
		e.Problems = append(e.Problems, loc.at("apiVersion", fmt.Sprintf("must be \"v1\", got %q", tm.APIVersion)))
	}
	if tm.Kind != "Pod" {
		e.Problems = append(e.Problems, loc.at("kind", fmt.Sprintf("must be \"Pod\", got %q", tm.Kind)))
	}
	if len(e.Problems) > 0 {
		return nil, loc, nil, &e
	}

	pod := &v1.Pod{}
	strict, err := sigsjson.UnmarshalStrict(js, pod)
	if err != nil {
		return nil, loc, nil, loc.typeError(err)
	}
	for _, se := range strict {
		var fe sigsjson.FieldError
		if !errors.As(se, &fe) {
			warnings = append(warnings, Problem{Detail: se.Error()})
			continue
		}
		detail := "unknown field, ignored"
		if strings.HasPrefix(se.Error(), "duplicate field") {
			detail = "duplicate field, the last value is used"
		}
		warnings = append(warnings, loc.at(fe.FieldPath(), detail))
	}
	return pod, loc, warnings, nil
}

// typeError describes a value of the wrong type (a string where a number
// belongs, a malformed quantity), naming the field and, where it can be
// found, the line.
func (l *Locator) typeError(err error) *Error {
	msg := strings.TrimPrefix(err.Error(), "json: ")
	if m := typeError.FindStringSubmatch(msg); m != nil {
		path, line := l.findTyped(m[2], m[1])
		return &Error{Problems: []Problem{{Line: line, Field: path, Detail: fmt.Sprintf("must be of type %s, got %s", m[3], m[1])}}}
	}
	if strings.Contains(msg, "quantities must match") {
		if path, line, value, ok := l.badQuantity(); ok {
			return &Error{Problems: []Problem{{Line: line, Field: path, Detail: fmt.Sprintf("invalid quantity %q", value)}}}
		}
		return problem(0, "", "invalid quantity: %s", msg)
	}
	return problem(0, "", "invalid manifest: %s", msg)
}

// typeField reads a top-level string field.
func typeField(top map[string]json.RawMessage, key string, into *string) error {
	raw, ok := top[key]
	if !ok {
		return nil
	}
	if err := json.Unmarshal(raw, into); err != nil {
		return fmt.Errorf("must be a string")
	}
	return nil
}

// lineAt returns the 1-based line of byte offset off in data.
func lineAt(data []byte, off int) int {
	if off > len(data) {
		off = len(data)
	}
	if off < 0 {
		off = 0
	}
	return bytes.Count(data[:off], []byte("\n")) + 1
}

// nodeCriticalPriority is the priority of system-node-critical.
const nodeCriticalPriority = 2000001000

// priorityWarning says, as upstream warns, when a static pod's priority and
// priorityClassName do not agree with each other or with
// system-node-critical (its mirror pod may then fail to be created, or be
// evicted in vain).
func priorityWarning(spec *v1.PodSpec) string {
	switch {
	case spec.Priority == nil && spec.PriorityClassName != "":
		return "static pod has priorityClassName and nil priority: priorityClassName is not used, and mirror pod creation may fail"
	case spec.Priority != nil && spec.PriorityClassName == "":
		return "static pod has priority without priorityClassName: mirror pod creation may fail if the default priority class does not match the given priority"
	case spec.Priority != nil && (*spec.Priority != nodeCriticalPriority || spec.PriorityClassName != "system-node-critical"):
		return fmt.Sprintf("static pod has a priority other than %d or a priorityClassName other than system-node-critical: its mirror pod may be evicted in vain", nodeCriticalPriority)
	}
	return ""
}

// StaticName returns the name a static pod called name gets on node
// nodeName.
func StaticName(name, nodeName string) string {
	return name + "-" + strings.ToLower(nodeName)
}

// makeStatic gives a defaulted pod its static pod identity.
func makeStatic(pod *v1.Pod, uid types.UID, o Options) {
	pod.UID = uid
	pod.Name = StaticName(pod.Name, o.NodeName)
	if pod.Namespace == "" {
		pod.Namespace = metav1.NamespaceDefault
	}
	pod.Spec.NodeName = o.NodeName
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[podconfig.AnnotationConfigHash] = string(uid)
	if o.Source != "" {
		pod.Annotations[podconfig.AnnotationConfigSource] = o.Source
	}
	if !o.Seen.IsZero() {
		pod.Annotations[podconfig.AnnotationConfigSeen] = o.Seen.Format(time.RFC3339Nano)
	} else {
		delete(pod.Annotations, podconfig.AnnotationConfigSeen)
	}
	if o.Source != podconfig.SourceHTTP {
		// As upstream, only for a file's pods.
		tolerateAllNoExecute(pod)
	}
	pod.Status = v1.PodStatus{Phase: v1.PodPending}
}

// tolerateAllNoExecute adds a toleration of every NoExecute taint, so that
// node problems never evict a static pod, unless the pod already has it.
func tolerateAllNoExecute(pod *v1.Pod) {
	want := v1.Toleration{Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute}
	for i, t := range pod.Spec.Tolerations {
		if t.Key == "" && t.Operator == want.Operator && t.Value == "" && t.Effect == want.Effect {
			pod.Spec.Tolerations[i] = want
			return
		}
	}
	pod.Spec.Tolerations = append(pod.Spec.Tolerations, want)
}

// toError converts validation errors to an *Error with lines.
func (l *Locator) toError(errs field.ErrorList) *Error {
	e := &Error{}
	for _, fe := range errs {
		e.Problems = append(e.Problems, l.at(fe.Field, fe.ErrorBody()))
	}
	return e
}

func (l *Locator) problem(fieldPath, format string, args ...any) *Error {
	return &Error{Problems: []Problem{l.at(fieldPath, fmt.Sprintf(format, args...))}}
}

func (l *Locator) at(fieldPath, detail string) Problem {
	return Problem{Line: l.Line(fieldPath), Field: fieldPath, Detail: detail}
}
