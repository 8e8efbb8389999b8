package nodestatus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	goruntime "runtime"
	"slices"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"

	"github.com/heartlet/heartlet/internal/mergepatch"
	heartletversion "github.com/heartlet/heartlet/internal/version"
)

// statusRetries is how many times one status update is tried.
const statusRetries = 5

// maxNamesPerImage bounds the names reported per image.
const maxNamesPerImage = 5

// Condition reasons and messages, as the upstream kubelet reports them.
const (
	reasonReady    = "KubeletReady"
	reasonNotReady = "KubeletNotReady"
	messageReady   = "kubelet is posting ready status"
)

// syncStatus registers the Node when needed and writes its status when it
// changed or ReportFrequency passed, trying up to five times.
// errNotRegistered means the Node does not exist and registration failed.
func (m *Manager) syncStatus(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	var err error
	for i := 0; i < statusRetries; i++ {
		if !m.registered && m.opts.RegisterNode {
			var created bool
			created, err = m.register(ctx)
			if err != nil {
				logger.Error(err, "Unable to register node", "node", m.opts.NodeName)
				return fmt.Errorf("%w: %w", errNotRegistered, err)
			}
			m.registered = true
			if created {
				return nil
			}
		}
		err = m.tryUpdateStatus(ctx, i)
		if err == nil {
			return nil
		}
		m.cacheStale.Store(true)
		if apierrors.IsNotFound(err) {
			m.registered = false
			if !m.opts.RegisterNode {
				logger.Error(err, "Node does not exist and registerNode is off", "node", m.opts.NodeName)
				return fmt.Errorf("%w: %w", errNotRegistered, err)
			}
			logger.Info("Node is gone from the API server, registering it again", "node", m.opts.NodeName)
			continue
		}
		logger.Error(err, "Unable to update node status, will retry", "node", m.opts.NodeName, "attempt", i+1)
		if i > 0 && m.opts.OnRepeatedFailure != nil {
			m.opts.OnRepeatedFailure()
		}
	}
	logger.Error(err, "Unable to update node status", "node", m.opts.NodeName, "attempts", statusRetries)
	return err
}

// tryUpdateStatus computes the status from the current Node (the watch's
// copy on the first try, a fresh GET on retries and while the watch's copy
// may be stale) and patches it when it
// changed meaningfully or ReportFrequency passed since the last report.
func (m *Manager) tryUpdateStatus(ctx context.Context, try int) error {
	var orig *v1.Node
	if try == 0 && !m.cacheStale.Load() {
		orig = m.cachedNode()
	}
	if orig == nil {
		var err error
		orig, err = m.heartbeat.CoreV1().Nodes().Get(ctx, m.opts.NodeName, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("getting node %s: %w", m.opts.NodeName, err)
		}
	}
	node := orig.DeepCopy()
	labelsFixed := labelsNeedFix(node)
	m.setStatus(ctx, node)
	changed := labelsFixed || statusChanged(&orig.Status, &node.Status)
	if !changed && m.clk.Since(m.lastReport) < m.opts.ReportFrequency {
		return nil
	}
	updated, err := m.patchStatus(ctx, orig, node)
	if err != nil {
		return err
	}
	m.lastReport = m.clk.Now()
	m.setLast(updated)
	m.noteStatus(node)
	return nil
}

// noteStatus records what was reported for the readers.
func (m *Manager) noteStatus(node *v1.Node) {
	m.mu.Lock()
	m.allocatable = node.Status.Allocatable.DeepCopy()
	m.mu.Unlock()
}

// patchStatus writes the difference between orig and node (metadata and
// status, never spec) to the nodes/status subresource with a strategic
// merge patch.
func (m *Manager) patchStatus(ctx context.Context, orig, node *v1.Node) (*v1.Node, error) {
	patch, err := statusPatch(orig, node)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", m.opts.NodeName, err)
	}
	n, err := m.heartbeat.CoreV1().Nodes().Patch(ctx, m.opts.NodeName, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return nil, fmt.Errorf("patching status of node %s: %w", m.opts.NodeName, err)
	}
	return n, nil
}

// statusPatch is the strategic merge patch from orig to node, spec left
// out. Addresses are replaced as a whole: their merge key (type) is not
// unique when a node has two InternalIPs.
func statusPatch(orig, node *v1.Node) ([]byte, error) {
	oldData, err := json.Marshal(orig)
	if err != nil {
		return nil, fmt.Errorf("encoding node: %w", err)
	}
	diff := node.DeepCopy()
	diff.Spec = orig.Spec
	replaceAddresses := len(orig.Status.Addresses) > 0 && !apiequality.Semantic.DeepEqual(orig.Status.Addresses, node.Status.Addresses)
	if replaceAddresses {
		diff.Status.Addresses = orig.Status.Addresses
	}
	newData, err := json.Marshal(diff)
	if err != nil {
		return nil, fmt.Errorf("encoding node: %w", err)
	}
	patch, err := mergepatch.CreateTwoWayMergePatch(oldData, newData, v1.Node{})
	if err != nil {
		return nil, fmt.Errorf("computing status patch: %w", err)
	}
	if !replaceAddresses {
		return patch, nil
	}
	var p map[string]any
	if err := json.Unmarshal(patch, &p); err != nil {
		return nil, fmt.Errorf("decoding status patch: %w", err)
	}
	status, _ := p["status"].(map[string]any)
	if status == nil {
		status = map[string]any{}
		p["status"] = status
	}
	addrs := []any{map[string]any{"$patch": "replace"}}
	for _, a := range node.Status.Addresses {
		addrs = append(addrs, map[string]any{"type": string(a.Type), "address": a.Address})
	}
	status["addresses"] = addrs
	return json.Marshal(p)
}

// statusChanged says whether status differs from orig other than in the
// conditions' heartbeat times.
func statusChanged(orig, status *v1.NodeStatus) bool {
	if len(orig.Conditions) != len(status.Conditions) {
		return true
	}
	byType := map[v1.NodeConditionType]v1.NodeCondition{}
	for _, c := range orig.Conditions {
		c.LastHeartbeatTime = metav1.Time{}
		byType[c.Type] = c
	}
	for _, c := range status.Conditions {
		c.LastHeartbeatTime = metav1.Time{}
		o, ok := byType[c.Type]
		if !ok || !apiequality.Semantic.DeepEqual(o, c) {
			return true
		}
	}
	a, b := orig.DeepCopy(), status.DeepCopy()
	a.Conditions, b.Conditions = nil, nil
	return !apiequality.Semantic.DeepEqual(a, b)
}

// setStatus fills node's status: capacity and allocatable, addresses,
// node info, images, daemon endpoints and the conditions (Ready last).
// What cannot be measured keeps its previous value and makes the node not
// Ready when a required capacity is missing.
func (m *Manager) setStatus(ctx context.Context, node *v1.Node) {
	logger := klog.FromContext(ctx)
	now := metav1.NewTime(m.clk.Now())

	// Capacity and allocatable; other resources (extended, set by
	// others) are kept.
	if node.Status.Capacity == nil {
		node.Status.Capacity = v1.ResourceList{}
	}
	if node.Status.Allocatable == nil {
		node.Status.Allocatable = v1.ResourceList{}
	}
	if capacity, err := m.capacity(); err != nil {
		logger.Error(err, "Unable to measure node capacity", "node", m.opts.NodeName)
	} else {
		for name := range node.Status.Capacity {
			if strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix) {
				if _, ok := capacity[name]; !ok {
					delete(node.Status.Capacity, name)
					delete(node.Status.Allocatable, name)
				}
			}
		}
		if m.opts.NoLocalStorage {
			// Reported by an earlier run with the isolation on.
			delete(node.Status.Capacity, v1.ResourceEphemeralStorage)
			delete(node.Status.Allocatable, v1.ResourceEphemeralStorage)
		}
		for k, v := range capacity {
			node.Status.Capacity[k] = v
		}
		alloc, err := allocatable(capacity, m.opts.Reserved, m.opts.EvictionHard)
		if err != nil {
			logger.Error(err, "Unable to compute allocatable resources", "node", m.opts.NodeName)
		} else {
			for k, v := range alloc {
				node.Status.Allocatable[k] = v
			}
		}
	}

	if addrs, err := m.host.nodeAddresses(m.opts.NodeName, m.opts.Hostname, m.opts.NodeIPs); err != nil {
		logger.Error(err, "Unable to determine node addresses", "node", m.opts.NodeName)
	} else {
		node.Status.Addresses = addrs
	}

	version, versionErr := m.rt.Version(ctx)
	m.setNodeInfo(node, version)
	m.setImages(ctx, node)
	node.Status.DaemonEndpoints.KubeletEndpoint.Port = m.opts.Port
	node.Status.DeclaredFeatures = slices.Sorted(slices.Values(m.opts.DeclaredFeatures))
	if f := m.opts.VolumesInUse; f != nil {
		node.Status.VolumesInUse = f()
	}

	var mem, disk, pid bool
	if p := m.opts.Pressure; p != nil {
		mem, disk, pid = p.MemoryPressure(), p.DiskPressure(), p.PIDPressure()
	}
	m.setCondition(ctx, node, now, v1.NodeMemoryPressure, mem,
		pressureText{"KubeletHasInsufficientMemory", "kubelet has insufficient memory available", "NodeHasInsufficientMemory"},
		pressureText{"KubeletHasSufficientMemory", "kubelet has sufficient memory available", "NodeHasSufficientMemory"})
	m.setCondition(ctx, node, now, v1.NodeDiskPressure, disk,
		pressureText{"KubeletHasDiskPressure", "kubelet has disk pressure", "NodeHasDiskPressure"},
		pressureText{"KubeletHasNoDiskPressure", "kubelet has no disk pressure", "NodeHasNoDiskPressure"})
	m.setCondition(ctx, node, now, v1.NodePIDPressure, pid,
		pressureText{"KubeletHasInsufficientPID", "kubelet has insufficient PID available", "NodeHasInsufficientPID"},
		pressureText{"KubeletHasSufficientPID", "kubelet has sufficient PID available", "NodeHasSufficientPID"})
	m.setReady(ctx, node, now, versionErr)
}

// setNodeInfo fills nodeInfo from the machine and the runtime.
func (m *Manager) setNodeInfo(node *v1.Node, version *runtimeapi.VersionResponse) {
	info := &node.Status.NodeInfo
	info.MachineID = m.host.firstLine(machineIDFile, dbusMachineID)
	info.SystemUUID = m.host.firstLine(productUUID)
	bootID := m.host.firstLine(bootIDFile)
	if info.BootID != "" && bootID != "" && info.BootID != bootID && !m.rebootReported {
		m.rebootReported = true
		m.event(v1.EventTypeWarning, "Rebooted", fmt.Sprintf("Node %s has been rebooted, boot id: %s", m.opts.NodeName, bootID))
	}
	info.BootID = bootID
	info.KernelVersion = m.host.firstLine(osReleaseFile)
	info.OSImage = m.host.osImage()
	info.OperatingSystem = goruntime.GOOS
	info.Architecture = goruntime.GOARCH
	info.KubeletVersion = heartletversion.Kubelet(m.opts.Version)
	if version != nil {
		m.runtimeVersion = version.RuntimeName + "://" + version.RuntimeVersion
	}
	switch {
	case m.runtimeVersion != "":
		info.ContainerRuntimeVersion = m.runtimeVersion
	case info.ContainerRuntimeVersion == "":
		info.ContainerRuntimeVersion = "unknown://Unknown"
	}
}

// setImages reports the runtime's images, largest first; on error the
// previous list stays.
func (m *Manager) setImages(ctx context.Context, node *v1.Node) {
	imgs, err := m.rt.ListImages(ctx)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Unable to list images for the node status", "node", m.opts.NodeName)
		if m.images != nil {
			node.Status.Images = m.images
		}
		return
	}
	out := make([]v1.ContainerImage, 0, len(imgs))
	for _, img := range imgs {
		names := append(append([]string{}, img.RepoDigests...), img.RepoTags...)
		if len(names) == 0 {
			continue
		}
		if len(names) > maxNamesPerImage {
			names = names[:maxNamesPerImage]
		}
		out = append(out, v1.ContainerImage{Names: names, SizeBytes: int64(img.Size)})
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].SizeBytes != out[j].SizeBytes {
			return out[i].SizeBytes > out[j].SizeBytes
		}
		return out[i].Names[0] < out[j].Names[0]
	})
	if limit := int(*m.opts.MaxImages); limit >= 0 && len(out) > limit {
		out = out[:limit]
	}
	if len(out) == 0 {
		out = nil
	}
	m.images = out
	node.Status.Images = out
}

// pressureText is a pressure condition's reason and message and the event
// recorded when it becomes so.
type pressureText struct{ reason, message, event string }

// setCondition sets a pressure condition: heartbeat now, transition time
// when the status changes (or the condition is new), and an event then.
func (m *Manager) setCondition(ctx context.Context, node *v1.Node, now metav1.Time, t v1.NodeConditionType, pressure bool, yes, no pressureText) {
	want, text := v1.ConditionFalse, no
	if pressure {
		want, text = v1.ConditionTrue, yes
	}
	c := findCondition(node, t)
	if c == nil {
		node.Status.Conditions = append(node.Status.Conditions, v1.NodeCondition{Type: t, Status: v1.ConditionUnknown})
		c = &node.Status.Conditions[len(node.Status.Conditions)-1]
	}
	c.LastHeartbeatTime = now
	if c.Status != want {
		c.Status, c.Reason, c.Message, c.LastTransitionTime = want, text.reason, text.message, now
		klog.FromContext(ctx).V(2).Info("Node condition changed", "node", m.opts.NodeName, "condition", t, "status", want)
		m.event(v1.EventTypeNormal, text.event, fmt.Sprintf("Node %s status is now: %s", m.opts.NodeName, text.event))
	}
}

// setReady sets the Ready condition: True when the runtime answers, its
// RuntimeReady and NetworkReady conditions hold, the required capacity is
// known, and every readiness check passes; False with every reason
// otherwise.
func (m *Manager) setReady(ctx context.Context, node *v1.Node, now metav1.Time, versionErr error) {
	errs := m.readyErrors(ctx, node, versionErr)
	cond := v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: reasonReady, Message: messageReady, LastHeartbeatTime: now}
	if agg := utilerrors.NewAggregate(errs); agg != nil {
		cond.Status, cond.Reason, cond.Message = v1.ConditionFalse, reasonNotReady, agg.Error()
	}
	c := findCondition(node, v1.NodeReady)
	if c == nil {
		cond.LastTransitionTime = now
		node.Status.Conditions = append(node.Status.Conditions, cond)
		return
	}
	cond.LastTransitionTime = c.LastTransitionTime
	if c.Status != cond.Status {
		cond.LastTransitionTime = now
		reason := "NodeReady"
		if cond.Status != v1.ConditionTrue {
			reason = "NodeNotReady"
			klog.FromContext(ctx).Info("Node became not ready", "node", m.opts.NodeName, "message", cond.Message)
		}
		m.event(v1.EventTypeNormal, reason, fmt.Sprintf("Node %s status is now: %s", m.opts.NodeName, reason))
	}
	*c = cond
}

func (m *Manager) readyErrors(ctx context.Context, node *v1.Node, versionErr error) []error {
	var errs []error
	if versionErr != nil {
		errs = append(errs, fmt.Errorf("container runtime is down: %w", versionErr))
	} else if rs, ok := m.rt.(runtimeStatus); ok {
		st, err := rs.Status(ctx)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("container runtime status check failed: %w", err))
		case st.GetStatus() == nil:
			errs = append(errs, errors.New("container runtime returned no status"))
		default:
			errs = append(errs, runtimeConditionErrors(st)...)
		}
	}
	var missing []string
	required := []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory, v1.ResourcePods}
	if !m.opts.NoLocalStorage {
		required = append(required, v1.ResourceEphemeralStorage)
	}
	for _, r := range required {
		if _, ok := node.Status.Capacity[r]; !ok {
			missing = append(missing, string(r))
		}
	}
	if len(missing) > 0 {
		errs = append(errs, fmt.Errorf("missing node capacity for resources: %s", strings.Join(missing, ", ")))
	}
	for _, f := range m.ready {
		if err := f(); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// runtimeConditionErrors reports the runtime's required conditions that do
// not hold, in upstream's wording.
func runtimeConditionErrors(st *runtimeapi.StatusResponse) []error {
	var errs []error
	for _, want := range []struct{ typ, what string }{
		{runtimeapi.RuntimeReady, "container runtime not ready"},
		{runtimeapi.NetworkReady, "container runtime network not ready"},
	} {
		var found *runtimeapi.RuntimeCondition
		for _, c := range st.GetStatus().GetConditions() {
			if c.GetType() == want.typ {
				found = c
			}
		}
		switch {
		case found == nil:
			errs = append(errs, fmt.Errorf("%s: %s is not reported", want.what, want.typ))
		case !found.GetStatus():
			errs = append(errs, fmt.Errorf("%s: %s=false reason:%s message:%s", want.what, want.typ, found.GetReason(), found.GetMessage()))
		}
	}
	return errs
}

func findCondition(node *v1.Node, t v1.NodeConditionType) *v1.NodeCondition {
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == t {
			return &node.Status.Conditions[i]
		}
	}
	return nil
}
