package agent

import (
	"k8s.io/utils/clock"

	"github.com/heartlet/heartlet/internal/config"
	"github.com/heartlet/heartlet/internal/images"
	"github.com/heartlet/heartlet/internal/podsync"
)

// newImageManager builds the image manager of the pod syncer: the node's
// pull limits from the configuration, events, pull timings, and the
// credentials of pulls (pods' imagePullSecrets read through secrets, nil
// in standalone mode, then the credential provider plugins); image
// garbage collection is told the images it returns.
func newImageManager(opts *config.Options, is images.ImageService, secrets images.SecretGetter, rec podsync.Recorder, pulls images.PullRecorder, j images.Journal, gc *images.GC, clk clock.Clock) *images.Manager {
	cfg := opts.Config
	var providers images.ProviderCredentials
	if opts.CredentialProviders != nil {
		providers = images.NewProviders(opts.CredentialProviders, opts.ImageCredentialProviderBinDir, clk)
	}
	return images.NewManager(is, images.ManagerOptions{
		Limits: images.Options{
			Serialize:   cfg.SerializeImagePulls == nil || *cfg.SerializeImagePulls,
			MaxParallel: int(derefInt32(cfg.MaxParallelImagePulls)),
			QPS:         float32(derefInt32(cfg.RegistryPullQPS)),
			Burst:       int(cfg.RegistryBurst),
		},
		Clock:    clk,
		Recorder: rec,
		Pulls:    pulls,
		Journal:  j,
		Ensured:  gc,
		Credentials: &images.PodCredentials{
			Secrets:   secrets,
			Providers: providers,
			Recorder:  rec,
		},
	})
}
