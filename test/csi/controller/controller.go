// Package controller is the cluster side of a CSI driver for the storage
// e2e tests, in a few lines each where upstream runs sidecars: a
// provisioner (external-provisioner: CreateVolume for the PVCs of the
// driver's StorageClasses, the bound PV, DeleteVolume when a released PV
// is to be deleted), an attacher (external-attacher: ControllerPublish for
// the driver's VolumeAttachments, status.attached with the publish
// context, ControllerUnpublish on deletion) and a resizer
// (external-resizer: ControllerExpandVolume when a bound PVC asks for more,
// leaving the node expansion to the kubelet). The kube-controller-manager's
// PV binder and attach-detach controller do the rest, as in a cluster.
//
// Each Run* function blocks until its context ends; a failed operation is
// retried with backoff and logged.
package controller

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// Config is what every loop needs.
type Config struct {
	// Client talks to the API server with rights over PVs, PVCs,
	// StorageClasses, CSINodes, Nodes and VolumeAttachments (the cluster
	// admin in the e2e tests).
	Client kubernetes.Interface
	// CSI is a connection to the driver's socket (see Dial).
	CSI grpc.ClientConnInterface
	// DriverName is the driver's name: the StorageClasses' provisioner and
	// the VolumeAttachments' attacher.
	DriverName string
	// Log receives a line per operation and failure; nil discards them.
	Log *slog.Logger
	// Resync is how often every object is looked at again (default 10s),
	// which also retries what a missed event left undone.
	Resync time.Duration
}

func (c *Config) defaults() error {
	if c.Client == nil || c.CSI == nil || c.DriverName == "" {
		return errors.New("controller: Client, CSI and DriverName are required")
	}
	if c.Log == nil {
		c.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.Resync == 0 {
		c.Resync = 10 * time.Second
	}
	return nil
}

// Dial connects to a CSI driver's unix socket. The connection is lazy: a
// driver that starts later is found when the first call is made.
func Dial(endpoint string) (*grpc.ClientConn, error) {
	conn, err := grpc.NewClient("unix://"+endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("controller: dialing %s: %w", endpoint, err)
	}
	return conn, nil
}

// Run runs the provisioner, the attacher and the resizer until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.defaults(); err != nil {
		return err
	}
	errs := make(chan error, 3)
	for _, run := range []func(context.Context, Config) error{RunProvisioner, RunAttacher, RunResizer} {
		go func() { errs <- run(ctx, cfg) }()
	}
	var first error
	for range 3 {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// loop runs sync for every key an informer reports until ctx ends, one key
// at a time, retrying failures with backoff.
type loop struct {
	name    string
	log     *slog.Logger
	factory informers.SharedInformerFactory
	queue   workqueue.TypedRateLimitingInterface[string]
}

func newLoop(cfg Config, name string) *loop {
	return &loop{
		name:    name,
		log:     cfg.Log.With("loop", name),
		factory: informers.NewSharedInformerFactory(cfg.Client, cfg.Resync),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](100*time.Millisecond, 5*time.Second),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: name}),
	}
}

// watch enqueues the key of every object inf reports, mapped by key.
func (l *loop) watch(inf cache.SharedIndexInformer, key func(obj any) (string, bool)) error {
	add := func(obj any) {
		if k, ok := key(obj); ok {
			l.queue.Add(k)
		}
	}
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    add,
		UpdateFunc: func(_, obj any) { add(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			add(obj)
		},
	})
	if err != nil {
		return fmt.Errorf("controller %s: adding an event handler: %w", l.name, err)
	}
	return nil
}

// metaKey is the namespace/name key of an object.
func metaKey(obj any) (string, bool) {
	k, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	return k, err == nil
}

// run starts the informers and works the queue until ctx ends.
func (l *loop) run(ctx context.Context, sync func(ctx context.Context, key string) error) error {
	defer l.queue.ShutDown()
	l.factory.Start(ctx.Done())
	defer l.factory.Shutdown()
	for typ, ok := range l.factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("controller %s: the %v cache did not sync", l.name, typ)
		}
	}
	go func() {
		<-ctx.Done()
		l.queue.ShutDown()
	}()
	for {
		key, shutdown := l.queue.Get()
		if shutdown {
			return nil
		}
		err := sync(ctx, key)
		switch {
		case err == nil:
			l.queue.Forget(key)
		case ctx.Err() != nil:
		default:
			l.log.Info("operation failed, retrying", "key", key, "err", err)
			l.queue.AddRateLimited(key)
		}
		l.queue.Done(key)
	}
}

// capability is the CSI capability of a volume with the given mode.
func capability(block bool, fsType string, mountFlags []string, mode csi.VolumeCapability_AccessMode_Mode) *csi.VolumeCapability {
	c := &csi.VolumeCapability{AccessMode: &csi.VolumeCapability_AccessMode{Mode: mode}}
	if block {
		c.AccessType = &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}
	} else {
		c.AccessType = &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: fsType, MountFlags: mountFlags}}
	}
	return c
}
