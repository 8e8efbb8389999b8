package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/heartlet/heartlet/internal/journal"
)

const explainUsage = `heartlet explain prints why a pod is (not) running: heartlet's journal of
its decisions about the pod (admission, volumes, image pulls, containers,
probes, backoffs, status writes) as a timeline, read from a running
heartlet's read-only port or its kubelet API.

Usage:
  heartlet explain [flags] NAMESPACE/POD
  heartlet explain [flags] POD            (namespace "default")

Examples:
  heartlet explain kube-system/etcd-node1
  heartlet explain --server https://node1:10250 --client-certificate admin.crt \
      --client-key admin.key --certificate-authority ca.crt default/web

Flags:
`

// explainDefaultServer is the read-only port on this machine.
const explainDefaultServer = "http://127.0.0.1:10255"

// explainFlags are heartlet explain's options.
type explainFlags struct {
	server, clientCert, clientKey, ca, tokenFile, output string
	insecure                                             bool
	timeout                                              time.Duration
}

func newExplainFlagSet(f *explainFlags) *pflag.FlagSet {
	fs := pflag.NewFlagSet("explain", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&f.server, "server", explainDefaultServer, "heartlet's read-only port (http://) or kubelet API (https://)")
	fs.StringVar(&f.clientCert, "client-certificate", "", "client certificate file for the kubelet API")
	fs.StringVar(&f.clientKey, "client-key", "", "client key file for the kubelet API")
	fs.StringVar(&f.ca, "certificate-authority", "", "CA file of the kubelet API's serving certificate")
	fs.StringVar(&f.tokenFile, "token-file", "", "file holding a bearer token for the kubelet API")
	fs.BoolVar(&f.insecure, "insecure-skip-tls-verify", false, "do not verify the kubelet API's serving certificate")
	fs.StringVar(&f.output, "output", "text", "text or json")
	fs.DurationVar(&f.timeout, "timeout", 10*time.Second, "bound of the request")
	return fs
}

// explain runs heartlet explain; see explainUsage.
func (c *command) explain(ctx context.Context, args []string) int {
	var f explainFlags
	fs := newExplainFlagSet(&f)
	fail := func(format string, a ...any) int {
		fmt.Fprintf(c.stderr, "heartlet explain: "+format+"\n", a...)
		return 1
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fmt.Fprint(c.stdout, explainUsage+fs.FlagUsages())
			return 0
		}
		return fail("%v (see heartlet explain --help)", err)
	}
	if fs.NArg() != 1 {
		return fail("want one pod as NAMESPACE/POD, got %d arguments (see heartlet explain --help)", fs.NArg())
	}
	ns, name, err := parsePodRef(fs.Arg(0))
	if err != nil {
		return fail("%v", err)
	}
	if f.output != "text" && f.output != "json" {
		return fail("--output %q: want text or json", f.output)
	}
	client, err := f.client()
	if err != nil {
		return fail("%v", err)
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	pj, err := fetchJournal(ctx, client, f, ns, name)
	if err != nil {
		return fail("%v", err)
	}
	if f.output == "json" {
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(pj)
	} else {
		err = journal.WriteTimeline(c.stdout, pj)
	}
	if err != nil {
		return fail("%v", err)
	}
	return 0
}

// parsePodRef splits NAMESPACE/POD; a bare POD is in "default".
func parsePodRef(ref string) (namespace, name string, err error) {
	namespace, name, ok := strings.Cut(ref, "/")
	if !ok {
		namespace, name = "default", ref
	}
	if namespace == "" || name == "" || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("pod %q: want NAMESPACE/POD", ref)
	}
	return namespace, name, nil
}

// client is the HTTP client of the flags: TLS with the given client
// certificate and CA for https servers.
func (f explainFlags) client() (*http.Client, error) {
	if (f.clientCert == "") != (f.clientKey == "") {
		return nil, errors.New("--client-certificate and --client-key go together")
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: f.insecure}
	if f.clientCert != "" {
		cert, err := tls.LoadX509KeyPair(f.clientCert, f.clientKey)
		if err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	if f.ca != "" {
		pem, err := os.ReadFile(f.ca)
		if err != nil {
			return nil, fmt.Errorf("certificate authority: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("certificate authority %s: no PEM certificate in it", f.ca)
		}
		cfg.RootCAs = pool
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg, Proxy: nil}}, nil
}

// fetchJournal GETs the pod's journal and says what to do when it cannot.
func fetchJournal(ctx context.Context, client *http.Client, f explainFlags, ns, name string) (journal.PodJournal, error) {
	var pj journal.PodJournal
	base, err := url.Parse(f.server)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return pj, fmt.Errorf("--server %q: want http://host:port or https://host:port", f.server)
	}
	u := base.JoinPath("debug", "pods", url.PathEscape(ns), url.PathEscape(name), "journal")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return pj, fmt.Errorf("request: %w", err)
	}
	if f.tokenFile != "" {
		tok, err := os.ReadFile(f.tokenFile)
		if err != nil {
			return pj, fmt.Errorf("token file: %w", err)
		}
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	}
	resp, err := client.Do(req)
	if err != nil {
		hint := ""
		if f.server == explainDefaultServer {
			hint = " (is heartlet running with readOnlyPort 10255? otherwise name its kubelet API with --server https://HOST:10250 and client credentials)"
		}
		return pj, fmt.Errorf("read the journal from %s: %w%s", f.server, err, hint)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return pj, fmt.Errorf("read the journal from %s: %w", f.server, err)
	}
	msg := strings.TrimSpace(string(body))
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return pj, fmt.Errorf("heartlet at %s does not know pod %s/%s: %s", f.server, ns, name, msg)
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return pj, fmt.Errorf("heartlet at %s refused the request (%s): %s; pass credentials allowed nodes/proxy (--client-certificate/--client-key or --token-file)", f.server, resp.Status, msg)
	case resp.StatusCode != http.StatusOK:
		return pj, fmt.Errorf("heartlet at %s answered %s: %s", f.server, resp.Status, msg)
	}
	if err := json.Unmarshal(body, &pj); err != nil {
		return pj, fmt.Errorf("decode the journal from %s: %w", f.server, err)
	}
	return pj, nil
}
