package volume

import (
	"context"
	"errors"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestKeyRefValues(t *testing.T) {
	e := newEnv(t, true)
	e.getter.setConfigMap(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "cfg"},
		Data: map[string]string{"mode": "fast"}, BinaryData: map[string][]byte{"blob": {1}}})
	e.getter.setSecret(&v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "creds"},
		Data: map[string][]byte{"password": []byte("pw")}})
	ctx := context.Background()

	tests := []struct {
		name      string
		secret    bool
		obj, key  string
		optional  bool
		wantValue string
		wantFound bool
		wantErr   error
		wantMsg   string
	}{
		{name: "configmap key", obj: "cfg", key: "mode", wantValue: "fast", wantFound: true},
		{name: "configmap binary key is not env", obj: "cfg", key: "blob", wantErr: ErrMissingKey, wantMsg: "couldn't find key blob in ConfigMap ns1/cfg"},
		{name: "configmap missing key", obj: "cfg", key: "nope", wantErr: ErrMissingKey, wantMsg: "couldn't find key nope in ConfigMap ns1/cfg"},
		{name: "configmap missing key optional", obj: "cfg", key: "nope", optional: true},
		{name: "configmap missing", obj: "absent", key: "k", wantErr: ErrMissingObject, wantMsg: `configmap "absent" not found`},
		{name: "configmap missing optional", obj: "absent", key: "k", optional: true},
		{name: "secret key", secret: true, obj: "creds", key: "password", wantValue: "pw", wantFound: true},
		{name: "secret missing key", secret: true, obj: "creds", key: "user", wantErr: ErrMissingKey, wantMsg: "couldn't find key user in Secret ns1/creds"},
		{name: "secret missing", secret: true, obj: "absent", key: "k", wantErr: ErrMissingObject, wantMsg: `secret "absent" not found`},
		{name: "secret missing optional", secret: true, obj: "absent", key: "k", optional: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			get := e.m.ConfigMapValue
			if tc.secret {
				get = e.m.SecretValue
			}
			v, found, err := get(ctx, "ns1", tc.obj, tc.key, tc.optional)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || err.Error() != tc.wantMsg {
					t.Fatalf("error = %v, want %v with message %q", err, tc.wantErr, tc.wantMsg)
				}
				return
			}
			if err != nil || v != tc.wantValue || found != tc.wantFound {
				t.Fatalf("= %q, %v, %v; want %q, %v, nil", v, found, err, tc.wantValue, tc.wantFound)
			}
		})
	}
}

func TestObjectData(t *testing.T) {
	e := newEnv(t, true)
	e.getter.setConfigMap(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "cfg"}, Data: map[string]string{"A": "1", "B": "2"}})
	e.getter.setSecret(&v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "creds"}, Data: map[string][]byte{"P": []byte("pw")}})
	ctx := context.Background()

	cm, err := e.m.ConfigMapData(ctx, "ns1", "cfg", false)
	if err != nil {
		t.Fatal(err)
	}
	mustEqualMap(t, cm, map[string]string{"A": "1", "B": "2"})
	sec, err := e.m.SecretData(ctx, "ns1", "creds", false)
	if err != nil {
		t.Fatal(err)
	}
	mustEqualMap(t, sec, map[string]string{"P": "pw"})

	if d, err := e.m.ConfigMapData(ctx, "ns1", "absent", true); err != nil || d != nil {
		t.Errorf("optional missing ConfigMap = %v, %v; want nil, nil", d, err)
	}
	if _, err := e.m.SecretData(ctx, "ns1", "absent", false); !errors.Is(err, ErrMissingObject) {
		t.Errorf("missing Secret = %v, want ErrMissingObject", err)
	}

	// Other API errors are wrapped with the object's name.
	e.getter.mu.Lock()
	e.getter.getErr = errors.New("forbidden")
	e.getter.mu.Unlock()
	_, err = e.m.ConfigMapData(ctx, "ns1", "cfg", true)
	if err == nil || errors.Is(err, ErrMissingObject) || !strings.Contains(err.Error(), "configmap ns1/cfg") {
		t.Errorf("API error = %v, want a wrapped error naming the ConfigMap", err)
	}
}

func TestValuesWithoutAPI(t *testing.T) {
	e := newEnv(t, false)
	ctx := context.Background()
	if _, _, err := e.m.ConfigMapValue(ctx, "ns1", "cfg", "k", false); !errors.Is(err, ErrNoAPI) {
		t.Errorf("ConfigMapValue = %v, want ErrNoAPI", err)
	}
	if _, err := e.m.SecretData(ctx, "ns1", "s", true); !errors.Is(err, ErrNoAPI) {
		t.Errorf("SecretData = %v, want ErrNoAPI", err)
	}
}
