package certificate

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	certutil "k8s.io/client-go/util/cert"
	clocktesting "k8s.io/utils/clock/testing"
)

var csrResource = schema.GroupResource{Group: "certificates.k8s.io", Resource: "certificatesigningrequests"}

// round is what fakeCSRs answers to one list and the watch after it.
type round struct {
	listErr error
	// listed is the object in the list; nil lists none.
	listed *certificatesv1.CertificateSigningRequest
	// watchErr fails the watch.
	watchErr error
	// events are sent on the watch; then it is closed when close is set,
	// else it stays open until the caller stops it.
	events []watch.Event
	close  bool
}

// fakeCSRs is a csrClient that answers by script: Create with create,
// Get with got/getErr, and each List (and the Watch after it) with the
// next round (the last one repeats).
type fakeCSRs struct {
	create func(*certificatesv1.CertificateSigningRequest) (*certificatesv1.CertificateSigningRequest, error)
	got    *certificatesv1.CertificateSigningRequest
	getErr error
	rounds []round

	mu        sync.Mutex
	created   []*certificatesv1.CertificateSigningRequest
	gets      []string
	lists     []metav1.ListOptions
	watches   []metav1.ListOptions
	listedRVs []string
}

func (f *fakeCSRs) Create(_ context.Context, csr *certificatesv1.CertificateSigningRequest, _ metav1.CreateOptions) (*certificatesv1.CertificateSigningRequest, error) {
	f.mu.Lock()
	f.created = append(f.created, csr.DeepCopy())
	f.mu.Unlock()
	return f.create(csr.DeepCopy())
}

func (f *fakeCSRs) Get(_ context.Context, name string, _ metav1.GetOptions) (*certificatesv1.CertificateSigningRequest, error) {
	f.mu.Lock()
	f.gets = append(f.gets, name)
	f.mu.Unlock()
	if f.getErr != nil {
		return nil, f.getErr
	}
	return f.got.DeepCopy(), nil
}

func (f *fakeCSRs) round() round {
	return f.rounds[min(len(f.lists), len(f.rounds))-1]
}

func (f *fakeCSRs) List(_ context.Context, opts metav1.ListOptions) (*certificatesv1.CertificateSigningRequestList, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists = append(f.lists, opts)
	r := f.round()
	if r.listErr != nil {
		return nil, r.listErr
	}
	rv := fmt.Sprintf("rv-%d", len(f.lists))
	f.listedRVs = append(f.listedRVs, rv)
	list := &certificatesv1.CertificateSigningRequestList{ListMeta: metav1.ListMeta{ResourceVersion: rv}}
	if r.listed != nil {
		list.Items = append(list.Items, *r.listed.DeepCopy())
	}
	return list, nil
}

func (f *fakeCSRs) Watch(_ context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.watches = append(f.watches, opts)
	r := f.round()
	if r.watchErr != nil {
		return nil, r.watchErr
	}
	w := watch.NewFakeWithChanSize(len(r.events), false)
	for _, ev := range r.events {
		w.Action(ev.Type, ev.Object)
	}
	if r.close {
		w.Stop()
	}
	return w, nil
}

func (f *fakeCSRs) counts() (lists, watches int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.lists), len(f.watches)
}

const testCSRName = "node-csr-test"

// testCSR is the request testCSRName with UID "uid-1" in the given state:
// "pending", "approved" (not issued), "issued", "denied" or "failed".
func testCSR(state string) *certificatesv1.CertificateSigningRequest {
	csr := &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: testCSRName, UID: "uid-1"}}
	cond := func(t certificatesv1.RequestConditionType, reason, msg string) {
		csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
			Type: t, Status: corev1.ConditionTrue, Reason: reason, Message: msg})
	}
	switch state {
	case "approved":
		cond(certificatesv1.CertificateApproved, "AutoApproved", "")
	case "issued":
		cond(certificatesv1.CertificateApproved, "AutoApproved", "")
		csr.Status.Certificate = []byte("issued-certificate")
	case "denied":
		cond(certificatesv1.CertificateDenied, "NotANode", "the requester is not the node")
	case "failed":
		cond(certificatesv1.CertificateApproved, "AutoApproved", "")
		cond(certificatesv1.CertificateFailed, "SignerValidationFailure", "the signer refused the names")
	}
	return csr
}

func withUID(csr *certificatesv1.CertificateSigningRequest, uid types.UID) *certificatesv1.CertificateSigningRequest {
	csr.UID = uid
	return csr
}

func withName(csr *certificatesv1.CertificateSigningRequest, name string) *certificatesv1.CertificateSigningRequest {
	csr.Name = name
	return csr
}

func modified(csr *certificatesv1.CertificateSigningRequest) watch.Event {
	return watch.Event{Type: watch.Modified, Object: csr}
}

// TestWaitForCertificate: the wait lists the request by name, watches it
// from the list's resource version, returns its certificate once it is
// approved and issued, fails with the condition when it is denied or
// failed, and lists again one retry interval (on the clock) after a failed
// list or watch or a watch the server closed.
func TestWaitForCertificate(t *testing.T) {
	gone := &metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired, Message: "too old resource version"}
	tests := []struct {
		name   string
		rounds []round
		// wantErr is a substring of the error; "" wants the certificate.
		wantErr string
		// lists and retries are the lists made and the retry intervals
		// waited.
		lists, retries int
	}{
		{name: "issued when listed", rounds: []round{{listed: testCSR("issued")}}, lists: 1},
		{name: "approved, then issued on the watch", rounds: []round{{listed: testCSR("pending"), events: []watch.Event{
			modified(testCSR("approved")), modified(testCSR("issued"))}}}, lists: 1},
		{name: "not listed yet, added issued", rounds: []round{{events: []watch.Event{
			{Type: watch.Added, Object: testCSR("issued")}}}}, lists: 1},
		{name: "another object's events are ignored", rounds: []round{{listed: testCSR("pending"), events: []watch.Event{
			modified(withName(testCSR("denied"), "other")), {Type: watch.Bookmark, Object: testCSR("pending")}, modified(testCSR("issued"))}}}, lists: 1},
		{name: "denied when listed", rounds: []round{{listed: testCSR("denied")}},
			wantErr: `node-csr-test is denied (reason "NotANode"): the requester is not the node`, lists: 1},
		{name: "failed on the watch", rounds: []round{{listed: testCSR("approved"), events: []watch.Event{modified(testCSR("failed"))}}},
			wantErr: `node-csr-test is failed (reason "SignerValidationFailure"): the signer refused the names`, lists: 1},
		{name: "deleted on the watch", rounds: []round{{listed: testCSR("pending"), events: []watch.Event{{Type: watch.Deleted, Object: testCSR("pending")}}}},
			wantErr: "was deleted", lists: 1},
		{name: "replaced by another of the name", rounds: []round{{listed: withUID(testCSR("issued"), "uid-2")}},
			wantErr: "was replaced", lists: 1},
		{name: "watch closed, then listed again", rounds: []round{
			{listed: testCSR("pending"), close: true},
			{listed: testCSR("issued")},
		}, lists: 2, retries: 1},
		{name: "watch closed twice, issued on the third watch", rounds: []round{
			{listed: testCSR("pending"), close: true},
			{listed: testCSR("approved"), close: true},
			{listed: testCSR("approved"), events: []watch.Event{modified(testCSR("issued"))}},
		}, lists: 3, retries: 2},
		{name: "watch error event, then listed again", rounds: []round{
			{listed: testCSR("pending"), events: []watch.Event{{Type: watch.Error, Object: gone}}},
			{listed: testCSR("issued")},
		}, lists: 2, retries: 1},
		{name: "list fails, then succeeds", rounds: []round{
			{listErr: apierrors.NewInternalError(errors.New("etcd"))},
			{listed: testCSR("issued")},
		}, lists: 2, retries: 1},
		{name: "watch fails, then listed again", rounds: []round{
			{listed: testCSR("pending"), watchErr: apierrors.NewServiceUnavailable("later")},
			{listed: testCSR("issued")},
		}, lists: 2, retries: 1},
		{name: "seen, then missing from a list", rounds: []round{
			{listed: testCSR("pending"), close: true},
			{},
		}, wantErr: "was deleted", lists: 2, retries: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeCSRs{rounds: tt.rounds}
			clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			done := make(chan struct{})
			var cert []byte
			var err error
			go func() {
				defer close(done)
				cert, err = waitForCertificate(context.Background(), clk, f, testCSRName, "uid-1")
			}()
			retries := 0
			deadline := time.Now().Add(waitFor)
		loop:
			for {
				select {
				case <-done:
					break loop
				default:
				}
				if clk.HasWaiters() {
					clk.Step(csrRetryInterval - time.Millisecond)
					if !clk.HasWaiters() {
						t.Fatal("listed again before the retry interval")
					}
					clk.Step(time.Millisecond)
					retries++
				}
				if time.Now().After(deadline) {
					t.Fatal("waitForCertificate did not return")
				}
				runtime.Gosched()
			}
			switch {
			case tt.wantErr == "" && (err != nil || string(cert) != "issued-certificate"):
				t.Fatalf("waitForCertificate = %q, %v; want the certificate", cert, err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("waitForCertificate = %q, %v; want an error with %q", cert, err, tt.wantErr)
			}
			if lists, _ := f.counts(); lists != tt.lists || retries != tt.retries {
				t.Errorf("%d lists after %d retry intervals, want %d after %d", lists, retries, tt.lists, tt.retries)
			}
			// Every list and watch is of the one object, and each watch
			// starts at its list's resource version.
			f.mu.Lock()
			defer f.mu.Unlock()
			for _, o := range append(slices.Clone(f.lists), f.watches...) {
				if o.FieldSelector != "metadata.name="+testCSRName {
					t.Errorf("field selector %q", o.FieldSelector)
				}
			}
			for i, w := range f.watches {
				if i < len(f.listedRVs) && w.ResourceVersion != f.listedRVs[i] {
					t.Errorf("watch %d from resource version %q, want the list's %q", i, w.ResourceVersion, f.listedRVs[i])
				}
			}
		})
	}
}

// TestWaitForCertificateContextEnds: the wait ends with ctx, whether it
// watches or waits to list again, with an error that wraps ctx's cause,
// and leaves nothing on the clock.
func TestWaitForCertificateContextEnds(t *testing.T) {
	tests := []struct {
		name   string
		rounds []round
		// ready says the wait is where the test ends it.
		ready func(*fakeCSRs, *clocktesting.FakeClock) bool
	}{
		{"while watching", []round{{listed: testCSR("pending")}}, func(f *fakeCSRs, _ *clocktesting.FakeClock) bool {
			_, w := f.counts()
			return w == 1
		}},
		{"while waiting to list again", []round{{listErr: apierrors.NewInternalError(errors.New("etcd"))}}, func(_ *fakeCSRs, c *clocktesting.FakeClock) bool {
			return c.HasWaiters()
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeCSRs{rounds: tt.rounds}
			clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			cause := errors.New("shutting down")
			ctx, cancel := context.WithCancelCause(context.Background())
			done := make(chan error, 1)
			go func() {
				_, err := waitForCertificate(ctx, clk, f, testCSRName, "uid-1")
				done <- err
			}()
			deadline := time.Now().Add(waitFor)
			for !tt.ready(f, clk) {
				if time.Now().After(deadline) {
					t.Fatal("the wait never got there")
				}
				runtime.Gosched()
			}
			cancel(cause)
			select {
			case err := <-done:
				if !errors.Is(err, cause) {
					t.Errorf("waitForCertificate = %v, want it to wrap the context's cause", err)
				}
			case <-time.After(waitFor):
				t.Fatal("waitForCertificate did not end with its context")
			}
			if n := clk.Waiters(); n != 0 {
				t.Errorf("%d waiters left on the clock", n)
			}
		})
	}
}

// csrKey is a key and a PEM request signed with it for the subject.
func csrKey(t *testing.T, subject pkix.Name) (crypto.Signer, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	req, err := certutil.MakeCSR(key, &subject, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return key, req
}

// TestRequestCertificate: the request is created with the name given
// (else generateName csr-), the signer, the usages and the PEM request;
// an existing request of the name is reused only when it is the same
// subject and signer, signed by the same key, and its certificate (if
// any) has not expired; other errors keep the server's status.
func TestRequestCertificate(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	subject := NodeSubject("node-1")
	key, req := csrKey(t, subject)
	_, otherKeyReq := csrKey(t, subject)
	_, otherSubjectReq := csrKey(t, NodeSubject("node-2"))
	ca := newTestCA(t)
	parsed, err := parseCertificateRequest(req)
	if err != nil {
		t.Fatal(err)
	}
	expired := ca.sign(t, parsed, key.Public(), now.Add(-2*time.Hour), now.Add(-time.Hour))
	valid := ca.sign(t, parsed, key.Public(), now.Add(-time.Hour), now.Add(time.Hour))

	exists := func(*certificatesv1.CertificateSigningRequest) (*certificatesv1.CertificateSigningRequest, error) {
		return nil, apierrors.NewAlreadyExists(csrResource, testCSRName)
	}
	existing := func(request []byte, signer string, cert []byte) *certificatesv1.CertificateSigningRequest {
		return &certificatesv1.CertificateSigningRequest{
			ObjectMeta: metav1.ObjectMeta{Name: testCSRName, UID: "uid-existing"},
			Spec:       certificatesv1.CertificateSigningRequestSpec{Request: request, SignerName: signer},
			Status:     certificatesv1.CertificateSigningRequestStatus{Certificate: cert},
		}
	}
	created := func(csr *certificatesv1.CertificateSigningRequest) (*certificatesv1.CertificateSigningRequest, error) {
		if csr.Name == "" {
			csr.Name = csr.GenerateName + "abcde"
		}
		csr.UID = "uid-new"
		return csr, nil
	}
	tests := []struct {
		name     string
		reqName  string
		create   func(*certificatesv1.CertificateSigningRequest) (*certificatesv1.CertificateSigningRequest, error)
		got      *certificatesv1.CertificateSigningRequest
		getErr   error
		wantName string
		wantUID  types.UID
		wantErr  string
		// check looks at the error further.
		check func(t *testing.T, err error)
	}{
		{name: "created with the name", reqName: testCSRName, create: created, wantName: testCSRName, wantUID: "uid-new"},
		{name: "created with generateName", create: created, wantName: "csr-abcde", wantUID: "uid-new"},
		{name: "existing one reused", reqName: testCSRName, create: exists, got: existing(req, ClientSigner, nil),
			wantName: testCSRName, wantUID: "uid-existing"},
		{name: "existing one with a valid certificate reused", reqName: testCSRName, create: exists, got: existing(req, ClientSigner, valid),
			wantName: testCSRName, wantUID: "uid-existing"},
		{name: "existing one of another key", reqName: testCSRName, create: exists, got: existing(otherKeyReq, ClientSigner, nil),
			wantErr: "not signed by this key"},
		{name: "existing one of another subject", reqName: testCSRName, create: exists, got: existing(otherSubjectReq, ClientSigner, nil),
			wantErr: "subject"},
		{name: "existing one of another signer", reqName: testCSRName, create: exists, got: existing(req, ServingSigner, nil),
			wantErr: "signerName"},
		{name: "existing one with an expired certificate", reqName: testCSRName, create: exists, got: existing(req, ClientSigner, expired),
			wantErr: "expired"},
		{name: "existing one cannot be read", reqName: testCSRName, create: exists, getErr: apierrors.NewForbidden(csrResource, testCSRName, errors.New("no")),
			wantErr: "get the existing", check: func(t *testing.T, err error) {
				if !apierrors.IsForbidden(err) {
					t.Errorf("error %v lost its status", err)
				}
			}},
		{name: "already exists without a name is not reused", create: exists, wantErr: "already exists"},
		{name: "create forbidden", reqName: testCSRName,
			create: func(*certificatesv1.CertificateSigningRequest) (*certificatesv1.CertificateSigningRequest, error) {
				return nil, apierrors.NewForbidden(csrResource, testCSRName, errors.New("no"))
			},
			wantErr: "forbidden", check: func(t *testing.T, err error) {
				if !apierrors.IsForbidden(err) {
					t.Errorf("error %v lost its status", err)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeCSRs{create: tt.create, got: tt.got, getErr: tt.getErr}
			usages := kubeletClientUsages(key)
			name, uid, err := requestCertificate(context.Background(), clocktesting.NewFakePassiveClock(now), f,
				csrRequest{name: tt.reqName, request: req, signerName: ClientSigner, usages: usages, key: key})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("requestCertificate = %s %s %v, want an error with %q", name, uid, err, tt.wantErr)
				}
				if tt.check != nil {
					tt.check(t, err)
				}
				return
			}
			if err != nil || name != tt.wantName || uid != tt.wantUID {
				t.Fatalf("requestCertificate = %s %s %v, want %s %s", name, uid, err, tt.wantName, tt.wantUID)
			}
			if len(f.created) != 1 {
				t.Fatalf("%d creates", len(f.created))
			}
			c := f.created[0]
			if c.Name != tt.reqName || (tt.reqName == "") != (c.GenerateName == "csr-") {
				t.Errorf("created name %q generateName %q", c.Name, c.GenerateName)
			}
			if c.Spec.SignerName != ClientSigner || !slices.Equal(c.Spec.Usages, usages) || string(c.Spec.Request) != string(req) {
				t.Errorf("created spec %+v", c.Spec)
			}
			if c.Spec.ExpirationSeconds != nil {
				t.Errorf("expirationSeconds %d, want unset", *c.Spec.ExpirationSeconds)
			}
			if reused := len(f.gets) > 0; reused != (tt.got != nil) {
				t.Errorf("read the existing request: %v", reused)
			}
		})
	}
}

// TestUsages: key encipherment only for an RSA key, as upstream's
// DefaultKubeletClientGetUsages and DefaultKubeletServingGetUsages.
func TestUsages(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sig, enc := certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment
	client, server := certificatesv1.UsageClientAuth, certificatesv1.UsageServerAuth
	for _, tc := range []struct {
		name   string
		usages func(any) []certificatesv1.KeyUsage
		key    any
		want   []certificatesv1.KeyUsage
	}{
		{"client RSA", kubeletClientUsages, rsaKey, []certificatesv1.KeyUsage{sig, enc, client}},
		{"client ECDSA", kubeletClientUsages, ecKey, []certificatesv1.KeyUsage{sig, client}},
		{"serving RSA", kubeletServingUsages, rsaKey, []certificatesv1.KeyUsage{sig, enc, server}},
		{"serving ECDSA", kubeletServingUsages, ecKey, []certificatesv1.KeyUsage{sig, server}},
	} {
		if got := tc.usages(tc.key); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
