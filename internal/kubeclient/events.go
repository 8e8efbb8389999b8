package kubeclient

// Event reasons heartlet records, spelled as the upstream kubelet spells
// them so that tools and alerts matching on them keep working. Several
// reasons share one spelling upstream (e.g. "Failed" for a container that
// failed to be created or started, and for a failed image pull).

// Container events.
const (
	Created             = "Created"
	Started             = "Started"
	Failed              = "Failed"
	Killing             = "Killing"
	Preempting          = "Preempting"
	BackOff             = "BackOff"
	ExceededGracePeriod = "ExceededGracePeriod"
)

// Pod events.
const (
	FailedKillPod            = "FailedKillPod"
	FailedCreatePodContainer = "FailedCreatePodContainer"
	NetworkNotReady          = "NetworkNotReady"
	FailedCreatePodSandBox   = "FailedCreatePodSandBox"
	FailedPodSandBoxStatus   = "FailedPodSandBoxStatus"
	SandboxChanged           = "SandboxChanged"
	FailedSync               = "FailedSync"
	FailedValidation         = "FailedValidation"
	// Evicted is the reason of a pod the node evicted.
	Evicted = "Evicted"
	// DNSConfigForming warns that a pod's DNS configuration was trimmed.
	DNSConfigForming = "DNSConfigForming"
)

// Image events.
const (
	Pulling           = "Pulling"
	Pulled            = "Pulled"
	InspectFailed     = "InspectFailed"
	ErrImageNeverPull = "ErrImageNeverPull"
	InvalidImageID    = "InvalidImageID"
)

// Volume events.
const (
	FailedMount                     = "FailedMount"
	FailedMountOnFilesystemMismatch = "FailedMountOnFilesystemMismatch"
	SuccessfulMountVolume           = "SuccessfulMountVolume"
	AlreadyMountedVolume            = "AlreadyMountedVolume"
	FailedAttachVolume              = "FailedAttachVolume"
)

// Lifecycle hook and probe events.
const (
	FailedPostStartHook = "FailedPostStartHook"
	FailedPreStopHook   = "FailedPreStopHook"
	Unhealthy           = "Unhealthy"
	ProbeWarning        = "ProbeWarning"
)

// Admission reasons: a pod rejected because the node lacks a resource is
// "OutOf" followed by the resource name.
const (
	OutOfPrefix              = "OutOf"
	OutOfcpu                 = "OutOfcpu"
	OutOfmemory              = "OutOfmemory"
	OutOfephemeralStorage    = "OutOfephemeral-storage"
	OutOfpods                = "OutOfpods"
	NodeAffinity             = "NodeAffinity"
	UnexpectedAdmissionError = "UnexpectedAdmissionError"
)

// Node events.
const (
	Starting                         = "Starting"
	NodeReady                        = "NodeReady"
	NodeNotReady                     = "NodeNotReady"
	NodeSchedulable                  = "NodeSchedulable"
	NodeNotSchedulable               = "NodeNotSchedulable"
	NodeHasSufficientMemory          = "NodeHasSufficientMemory"
	NodeHasInsufficientMemory        = "NodeHasInsufficientMemory"
	NodeHasNoDiskPressure            = "NodeHasNoDiskPressure"
	NodeHasDiskPressure              = "NodeHasDiskPressure"
	NodeHasSufficientPID             = "NodeHasSufficientPID"
	NodeHasInsufficientPID           = "NodeHasInsufficientPID"
	Rebooted                         = "Rebooted"
	Shutdown                         = "Shutdown"
	KubeletSetupFailed               = "KubeletSetupFailed"
	InvalidDiskCapacity              = "InvalidDiskCapacity"
	FreeDiskSpaceFailed              = "FreeDiskSpaceFailed"
	ContainerGCFailed                = "ContainerGCFailed"
	ImageGCFailed                    = "ImageGCFailed"
	NodeAllocatableEnforced          = "NodeAllocatableEnforced"
	FailedNodeAllocatableEnforcement = "FailedNodeAllocatableEnforcement"
)
