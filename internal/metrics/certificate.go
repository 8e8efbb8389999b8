package metrics

import (
	"math"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// The certificate managers' metrics, as upstream's kubelet registers them
// for rotateCertificates and serverTLSBootstrap.
var (
	// ClientCertificateTTL is the seconds until the client certificate
	// expires (negative once expired; +Inf when there is none).
	ClientCertificateTTL = prometheus.NewGauge(prometheus.GaugeOpts{
		Subsystem: subsystem,
		Name:      "certificate_manager_client_ttl_seconds",
		Help:      "Gauge of the TTL (time-to-live) of the Kubelet's client certificate. The value is in seconds until certificate expiry (negative if already expired). If client certificate is invalid or unused, the value will be +INF.",
	})

	// ClientCertificateRenewErrors counts failed client certificate
	// renewals.
	ClientCertificateRenewErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Subsystem: subsystem,
		Name:      "certificate_manager_client_expiration_renew_errors",
		Help:      "Counter of certificate renewal errors.",
	})

	// ServerCertificateTTL is the seconds until the serving certificate
	// expires (negative once expired; +Inf when there is none).
	ServerCertificateTTL = prometheus.NewGauge(prometheus.GaugeOpts{
		Subsystem: subsystem,
		Name:      "certificate_manager_server_ttl_seconds",
		Help:      "Gauge of the shortest TTL (time-to-live) of the Kubelet's serving certificate. The value is in seconds until certificate expiry (negative if already expired). If serving certificate is invalid or unused, the value will be +INF.",
	})

	// ServerCertificateRotation observes how long each serving certificate
	// lived before it was replaced.
	ServerCertificateRotation = prometheus.NewHistogram(prometheus.HistogramOpts{
		Subsystem: subsystem,
		Name:      "certificate_manager_server_rotation_seconds",
		Help:      "Histogram of the number of seconds the previous certificate lived before being rotated.",
		Buckets: []float64{
			60,        // 1 minute
			3600,      // 1 hour
			14400,     // 4 hours
			86400,     // 1 day
			604800,    // 1 week
			2592000,   // 1 month
			7776000,   // 3 months
			15552000,  // 6 months
			31104000,  // 1 year
			124416000, // 4 years
		},
	})

	// ServerCertificateRenewErrors counts failed serving certificate
	// renewals.
	ServerCertificateRenewErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Subsystem: subsystem,
		Name:      "server_expiration_renew_errors",
		Help:      "Counter of certificate renewal errors.",
	})
)

var registerClient, registerServer sync.Once

// RegisterClientCertificate adds the client certificate's metrics to
// Registry; as upstream, they exist only with rotateCertificates. It may
// be called more than once.
func RegisterClientCertificate() {
	registerClient.Do(func() {
		ClientCertificateTTL.Set(math.Inf(1))
		Registry.MustRegister(ClientCertificateTTL, ClientCertificateRenewErrors)
	})
}

// RegisterServerCertificate adds the serving certificate's metrics to
// Registry; as upstream, they exist only with serverTLSBootstrap. It may
// be called more than once.
func RegisterServerCertificate() {
	registerServer.Do(func() {
		ServerCertificateTTL.Set(math.Inf(1))
		Registry.MustRegister(ServerCertificateTTL, ServerCertificateRotation, ServerCertificateRenewErrors)
	})
}
