package nodepage

import "html/template"

// pageTemplate is the page ("page") and its body ("body"), which the page
// fetches again every RefreshMillis. html/template escapes every value by
// its context; nothing is marked safe.
var pageTemplate = template.Must(template.New("page").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>heartlet: {{.NodeName}}</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:1em 2em;color:#222;background:#fafafa}
h1{font-size:1.4em;margin:.2em 0}h2{font-size:1.1em;margin:1.2em 0 .4em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.3em 0}td,th{padding:.2em .6em;text-align:left;vertical-align:top;border-bottom:1px solid #eee}
th{font-weight:600;color:#555}.bad{color:#b00020;font-weight:600}.ok{color:#1b7f3b}
.pod{background:#fff;border:1px solid #ddd;border-radius:6px;padding:.5em 1em;margin:.6em 0}
.pod h3{margin:.2em 0;font-size:1.05em}.muted{color:#777}.journal{font-family:ui-monospace,monospace;font-size:12px}
svg.spark{vertical-align:middle;background:#f0f4f8}svg.spark polyline{fill:none;stroke:#2b6cb0;stroke-width:1.5}
#updated{color:#777;font-size:12px}
</style>
</head>
<body>
<h1>heartlet on {{.NodeName}}</h1>
<p id="updated">Updates itself every {{.RefreshMillis}} ms.</p>
<main id="content">{{template "body" .}}</main>
<script nonce="{{.Nonce}}">
(function () {
  const every = {{.RefreshMillis}};
  const content = document.getElementById("content");
  const updated = document.getElementById("updated");
  async function refresh() {
    try {
      const r = await fetch("node/body", {credentials: "same-origin", cache: "no-store"});
      if (!r.ok) { throw new Error("HTTP " + r.status); }
      content.innerHTML = await r.text();
      updated.textContent = "Updated " + new Date().toLocaleTimeString() + "; updates itself every " + every + " ms.";
    } catch (e) {
      updated.textContent = "Update failed (" + e.message + "); showing the last data.";
    }
  }
  setInterval(refresh, every);
})();
</script>
</body>
</html>
{{define "spark"}}<svg class="spark" width="{{.Width}}" height="{{.Height}}" viewBox="0 0 {{.Width}} {{.Height}}" role="img" aria-label="{{.Latest}}"><polyline points="{{.Points}}"/></svg> {{.Latest}}{{end}}
{{define "body"}}<p class="muted" data-now="{{.Now}}">Node time {{.Now}}; samples every {{.SampleEvery}}.</p>
<h2>Node</h2>
{{if .Conditions}}<table id="conditions"><tr><th>Condition</th><th>Status</th><th>Reason</th><th>Message</th></tr>
{{range .Conditions}}<tr><td>{{.Type}}</td><td class="{{if .Bad}}bad{{else}}ok{{end}}">{{.Status}}</td><td>{{.Reason}}</td><td>{{.Message}}</td></tr>
{{end}}</table>{{else}}<p class="muted">No node conditions (standalone mode: no Node object).</p>{{end}}
<table id="resources"><tr><th>Resource</th><th>Allocatable</th><th>Requested</th><th>Used</th></tr>
{{range .Resources}}<tr><td>{{.Name}}</td><td>{{.Allocatable}}</td><td>{{.Requested}}</td><td>{{.Used}}</td></tr>
{{end}}</table>
<p>CPU {{template "spark" .NodeCPU}} &nbsp; Memory {{template "spark" .NodeMemory}}</p>
<h2>Pods ({{len .Pods}})</h2>
{{range .Pods}}<section class="pod" data-pod="{{.Namespace}}/{{.Name}}">
<h3>{{.Namespace}}/{{.Name}} <span class="{{if or (eq .Phase "Failed") (eq .Phase "Pending")}}bad{{else}}ok{{end}}">{{.Phase}}</span>{{if .Reason}} <span class="bad">{{.Reason}}</span>{{end}}</h3>
{{if .Message}}<p>{{.Message}}</p>{{end}}
<p class="muted">uid {{.UID}} &nbsp; CPU {{template "spark" .CPU}} &nbsp; Memory {{template "spark" .Memory}}</p>
<table class="containers"><tr><th>Container</th><th>State</th><th>Restarts</th><th>Ready</th><th>Started</th><th>Probes</th></tr>
{{range .Containers}}<tr data-container="{{.Name}}"><td>{{.Name}}{{if .Kind}} <span class="muted">({{.Kind}})</span>{{end}}</td><td class="{{if eq .State "running"}}ok{{else}}bad{{end}}">{{.State}}{{if .Detail}} <span class="muted">{{.Detail}}</span>{{end}}</td><td>{{.Restarts}}</td><td class="{{if .Ready}}ok{{else}}bad{{end}}">{{.Ready}}</td><td>{{.Started}}</td><td>{{.Probes}}</td></tr>
{{end}}</table>
{{if .Journal}}<table class="journal">{{range .Journal}}<tr><td>{{.Ago}}</td><td>{{.Kind}}</td><td>{{.Text}}</td></tr>{{end}}</table>{{end}}
</section>
{{else}}<p class="muted">No pods.</p>
{{end}}
<h2>Latest decisions</h2>
{{if .Latest}}<table class="journal" id="latest">{{range .Latest}}<tr><td>{{.Ago}}</td><td>{{.Pod}}</td><td>{{.Kind}}</td><td>{{.Text}}</td></tr>
{{end}}</table>{{else}}<p class="muted">None yet.</p>{{end}}
<h2>Events</h2>
{{if .Events}}<table class="journal" id="events"><tr><th>Last seen</th><th>Type</th><th>Object</th><th>Reason</th><th>Message</th><th>Count</th></tr>
{{range .Events}}<tr><td>{{.Ago}}</td><td class="{{if .Warning}}bad{{else}}ok{{end}}">{{.Type}}</td><td>{{.Object}}</td><td>{{.Reason}}</td><td>{{.Message}}</td><td>{{.Count}}</td></tr>
{{end}}</table>{{else if .EventsOn}}<p class="muted">None yet.</p>{{else}}<p class="muted">No events (standalone mode: events are recorded for the API server only).</p>{{end}}
<h2>heartlet</h2>
<table id="health"><tr><th>Loop</th><th>Found</th></tr>
{{range .Health}}<tr><td>{{.Name}}</td><td class="{{if .OK}}ok{{else}}bad{{end}}">{{.Value}}</td></tr>
{{end}}</table>
{{end}}`))
