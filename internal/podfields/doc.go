package podfields

import (
	"bytes"
	"fmt"
	"strings"
)

// Doc renders the table as the Markdown page docs/pod-fields.md.
func Doc() []byte {
	var b bytes.Buffer
	b.WriteString(`# Pod fields

Every field of the Kubernetes 1.37 pod API (` + "`PodSpec`" + `, ` + "`PodSecurityContext`" + `,
` + "`Container`" + `, ` + "`EphemeralContainer`" + `, ` + "`SecurityContext`" + `, ` + "`Lifecycle`" + `,
` + "`LifecycleHandler`" + `, ` + "`Probe`" + `) and what heartlet does with it:

- **honoured**: as the upstream kubelet;
- **not yet**: not acted on yet; a pod that uses it runs, and a Warning
  event ` + "`UnsupportedPodField`" + ` names the field when the pod is admitted;
- **refused**: running the pod without it would be unsafe; a pod that uses
  it is rejected: it is ` + "`Failed`" + ` with reason ` + "`UnsupportedPodField`" + ` and a
  message naming the field, and no container of it ever runs.

A field counts as used when it is set to other than its zero value and,
where noted, to a value heartlet does not honour (` + "`appArmorProfile`" + ` other
than ` + "`Unconfined`" + `; ` + "`hostUsers: false`" + `,
` + "`supplementalGroupsPolicy: Strict`" + ` and ` + "`recursiveReadOnly: Enabled`" + `
only when the runtime does not report that feature).

Generated from ` + "`internal/podfields`" + ` by
` + "`go test ./internal/podfields -run TestDoc -update`" + `; the test fails when
this page is stale or a field of the API is missing from the table.

`)
	var not []Field
	for _, f := range Fields() {
		if f.Support != Honoured {
			not = append(not, f)
		}
	}
	b.WriteString("## Not honoured\n\n| field | | why |\n|---|---|---|\n")
	for _, f := range not {
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", f.Path, f.Support, esc(f.Note))
	}
	b.WriteString("\n## Every field\n\n| field | | note |\n|---|---|---|\n")
	for _, f := range Fields() {
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", f.Path, f.Support, esc(f.Note))
	}
	return b.Bytes()
}

func esc(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
