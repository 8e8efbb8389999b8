//go:build integration

package controller

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// TestIntegrationProvisionResizeDelete runs the provisioner and the resizer
// against the real control plane: the PV controller hands the claim to the
// driver, binds the provisioned PV, the API server accepts the resizer's
// status writes, and the released PV is deleted with its volume.
func TestIntegrationProvisionResizeDelete(t *testing.T) {
	kubeconfig := os.Getenv("HEARTLET_KUBECONFIG")
	if kubeconfig == "" {
		t.Skip("HEARTLET_KUBECONFIG is not set: it must name an admin kubeconfig of a real control plane (hack/kube.sh)")
	}
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	sock := filepath.Join(t.TempDir(), "csi.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	drv := &fakeDriver{}
	srv := grpc.NewServer()
	csi.RegisterControllerServer(srv, drv)
	go func() { _ = srv.Serve(l) }()
	defer srv.Stop()
	conn, err := Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	suffix := fmt.Sprintf("%d", time.Now().UnixNano()%1_000_000)
	driver := "ctrl-" + suffix + ".csi.heartlet.test"
	ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "csi-controller-" + suffix}}
	if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer client.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "csi-controller-" + suffix}, Provisioner: driver, AllowVolumeExpansion: ptr(true)}
	if _, err := client.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer client.StorageV1().StorageClasses().Delete(context.Background(), sc.Name, metav1.DeleteOptions{})

	loopCtx, stopLoops := context.WithCancel(ctx)
	done := make(chan error, 1)
	cfg := Config{Client: client, CSI: conn, DriverName: driver, Resync: 2 * time.Second,
		Log: slog.New(slog.NewTextHandler(testWriter{t}, nil))}
	go func() { done <- Run(loopCtx, cfg) }()
	defer func() {
		stopLoops()
		if err := <-done; err != nil {
			t.Errorf("controller loops: %v", err)
		}
	}()

	pvc := &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: ns.Name},
		Spec: v1.PersistentVolumeClaimSpec{
			StorageClassName: ptr(sc.Name),
			AccessModes:      []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			Resources:        v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if pvc, err = client.CoreV1().PersistentVolumeClaims(ns.Name).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, "the claim bound by the PV controller", func() bool {
		got, err := client.CoreV1().PersistentVolumeClaims(ns.Name).Get(ctx, pvc.Name, metav1.GetOptions{})
		if err != nil || got.Status.Phase != v1.ClaimBound {
			return false
		}
		pvc = got
		return true
	})
	if pvc.Spec.VolumeName != PVName(pvc) || pvc.Annotations[AnnStorageProvisioner] != driver {
		t.Fatalf("bound claim: volume %q, annotations %v", pvc.Spec.VolumeName, pvc.Annotations)
	}

	pvc.Spec.Resources.Requests[v1.ResourceStorage] = resource.MustParse("2Gi")
	if _, err := client.CoreV1().PersistentVolumeClaims(ns.Name).Update(ctx, pvc, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("asking for 2Gi: %v", err)
	}
	eventually(t, ctx, "the claim's pending node expansion", func() bool {
		got, err := client.CoreV1().PersistentVolumeClaims(ns.Name).Get(ctx, pvc.Name, metav1.GetOptions{})
		return err == nil && got.Status.AllocatedResourceStatuses[v1.ResourceStorage] == v1.PersistentVolumeClaimNodeResizePending
	})
	pv, err := client.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if q := pv.Spec.Capacity[v1.ResourceStorage]; q.Value() != 2<<30 {
		t.Errorf("PV capacity after the resize %s, want 2Gi", q.String())
	}

	if err := client.CoreV1().PersistentVolumeClaims(ns.Name).Delete(ctx, pvc.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, "the released PV's deletion", func() bool {
		_, err := client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
		return err != nil
	})
	if dels := callsOf[*csi.DeleteVolumeRequest](drv); len(dels) != 1 || dels[0].GetVolumeId() != pv.Spec.CSI.VolumeHandle {
		t.Errorf("DeleteVolume calls %v", dels)
	}
}
