package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// headerFlags collects repeated -header NAME:VALUE flags.
type headerFlags []string

func (h *headerFlags) String() string     { return strings.Join(*h, ",") }
func (h *headerFlags) Set(v string) error { *h = append(*h, v); return nil }

// fetch GETs one URL, as a pod calling an API with its mounted service
// account would, and writes the body to w or to -o atomically.
func fetch(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("fetch", flag.ContinueOnError)
	caFile := fs.String("ca-file", "", "PEM CA bundle that verifies the server")
	tokenFile := fs.String("token-file", "", "file whose content is sent as a bearer token")
	insecure := fs.Bool("insecure", false, "do not verify the server certificate")
	out := fs.String("o", "", "write the body to this file (atomically) instead of stdout")
	timeout := fs.Duration("timeout", 10*time.Second, "request timeout")
	var headers headerFlags
	fs.Var(&headers, "header", "extra request header NAME:VALUE (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("fetch needs exactly one URL")
	}
	url := fs.Arg(0)

	tlsCfg := &tls.Config{InsecureSkipVerify: *insecure} //nolint:gosec // test tool, opt-in flag
	if *caFile != "" {
		pem, err := os.ReadFile(*caFile)
		if err != nil {
			return fmt.Errorf("read CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("CA file %s holds no PEM certificate", *caFile)
		}
		tlsCfg.RootCAs = pool
	}
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("build request: %w", err)
	}
	if *tokenFile != "" {
		tok, err := os.ReadFile(*tokenFile)
		if err != nil {
			return fmt.Errorf("read token file: %w", err)
		}
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	}
	for _, h := range headers {
		name, value, ok := strings.Cut(h, ":")
		if !ok {
			return fmt.Errorf("header %q: want NAME:VALUE", h)
		}
		req.Header.Add(strings.TrimSpace(name), strings.TrimSpace(value))
	}
	client := &http.Client{Timeout: *timeout, Transport: &http.Transport{TLSClientConfig: tlsCfg}}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("read body of %s: %w", url, err)
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	if *out == "" {
		_, err := w.Write(body)
		return err
	}
	tmp := filepath.Join(filepath.Dir(*out), "."+filepath.Base(*out)+".tmp")
	if err := os.WriteFile(tmp, body, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	return os.Rename(tmp, *out)
}
