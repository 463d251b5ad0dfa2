// Package helm holds the tests of toolbus's Helm chart (deploy/helm/toolbus) and of the
// values for the official NATS chart beside it (nats-values.yaml). It is a module of its
// own, so that the Kubernetes API types its tests decode every rendered object into are
// no dependency of toolbus.
//
// The tests run the helm binary that scripts/install-test-tools builds into
// .cache/bin: `helm template` for the default values, an external NATS, two tenants and
// KEDA on and off; `helm lint --strict`; and wrong values, which the chart's schema must
// refuse. scripts/test runs them:
//
//	cd deploy/helm && go test ./...
package helm
