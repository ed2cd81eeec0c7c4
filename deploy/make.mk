# The deployment kit (issue 25): Helm chart, Prometheus rules, Grafana dashboard, systemd unit.
# Included by the top Makefile.
#   make test-deploy         every check below (part of make test), about 30 s warm
#   make test-deploy-helm    the chart rendered by Helm's engine (PyPI helm-python-sdk: the
#                            Helm v4 Go SDK; no helm binary is to be had here) with the default
#                            values and each coordinator, every manifest validated against the
#                            Kubernetes schemas of PyPI's kubernetes-validate (1.28 and newest),
#                            helm lint --strict, and the chart's refusals (deploy/helm/check.py)
#   make test-deploy-prometheus  promtool check rules + promtool test rules (Debian prometheus)
#   make test-deploy-metrics the rules and the dashboard name only metrics the server exports
#                            (server/src/telemetry.rs and a live /metrics scrape)
#   make test-deploy-systemd systemd-analyze verify, and security --offline at most 2.0
#   make test-deploy-app     the example application's manifests (deploy/app: a Deployment leasing
#                            from PostgreSQL or Redis, a StatefulSet on k8s://) validated against
#                            the Kubernetes schemas, and their grace periods against the lease TTL
#                            (deploy/app/check.py)
#   make test-deploy-app-image  the example application's image built from local files and stopped
#                            as the kubelet stops a pod: SIGTERM releases the worker id, a newcomer
#                            takes it at once (deploy/app/image.sh; podman, Redis)
#   make dist-deploy         the chart packaged into dist/ (part of make dist)

DEPLOY := $(ROOT)/deploy
DEPLOY_PY_TOOLS := helm-python-sdk==0.2.2

.PHONY: test-deploy test-deploy-helm test-deploy-prometheus test-deploy-metrics \
  test-deploy-systemd setup-deploy-py setup-promtool dist-deploy test-deploy-app \
  test-deploy-app-image

setup-deploy-py: setup-server-py
	@$(SERVER_PY) -c 'import helm_python' 2>/dev/null \
	  || $(SERVER_PY) -m pip install -q --disable-pip-version-check $(DEPLOY_PY_TOOLS)

setup-promtool:
	@command -v promtool >/dev/null || { apt-get -o DPkg::Lock::Timeout=600 update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq \
	  --no-install-recommends prometheus >/dev/null; }

test-deploy-helm: setup-deploy-py
	$(SERVER_PY) $(DEPLOY)/helm/check.py

test-deploy-prometheus: setup-promtool
	cd $(DEPLOY)/prometheus && promtool check rules clockflake-rules.yml \
	  && promtool test rules clockflake-rules.test.yml

# A live scrape of the debug server (file:// lease) beside the names in telemetry.rs.
test-deploy-metrics: setup-server-py setup-rust
	$(CARGO) build -q -p clockflake-server
	@dir=$$(mktemp -d /tmp/clockflake-deploy-metrics.XXXXXX); out=$$dir/stdout; \
	RUST_LOG=warn $(SERVER_BIN) --lease "file://$$dir/leases?app=metrics" --listen 127.0.0.1:0 >$$out & \
	pid=$$!; trap 'kill $$pid 2>/dev/null || true; wait $$pid 2>/dev/null || true; rm -rf '"$$dir" EXIT; \
	for _ in $$(seq 100); do grep -q listening $$out && break; sleep 0.1; done; \
	base=$$(sed -n 's/.*listening on //p' $$out); curl -fsS "$$base/v1/id" >/dev/null; \
	$(SERVER_PY) $(DEPLOY)/check_metrics.py "$$base/metrics"

# The unit as installed, with ExecStart pointing at the debug binary (verify checks that it
# exists and is executable). systemd-analyze runs here without systemd as PID 1.
test-deploy-systemd: setup-rust
	$(CARGO) build -q -p clockflake-server
	@command -v systemd-analyze >/dev/null || { echo "systemd-analyze not found (Debian's systemd)"; exit 1; }
	@dir=$$(mktemp -d /tmp/clockflake-unit.XXXXXX); trap 'rm -rf '"$$dir" EXIT; \
	sed 's|^ExecStart=/usr/local/bin/clockflake-server|ExecStart=$(SERVER_BIN)|' \
	  $(DEPLOY)/systemd/clockflake-server.service > $$dir/clockflake-server.service; \
	systemd-analyze verify $$dir/clockflake-server.service && echo "systemd-analyze verify: ok"; \
	systemd-analyze security --offline=yes --threshold=20 $$dir/clockflake-server.service \
	  | tail -1

test-deploy-app: setup-server-py
	$(SERVER_PY) $(DEPLOY)/app/check.py

DEPLOY_APP_IMAGE := localhost/clockflake-orders-example:test
test-deploy-app-image: build-python setup-recipes setup-curl
	@trap 'podman --runtime runc rmi -f $(DEPLOY_APP_IMAGE) >/dev/null 2>&1 || true' EXIT; \
	bash $(DEPLOY)/app/image.sh build $(DEPLOY_APP_IMAGE) >/dev/null && \
	bash $(DEPLOY)/app/image.sh test $(DEPLOY_APP_IMAGE)

test-deploy: test-deploy-helm test-deploy-prometheus test-deploy-metrics test-deploy-systemd \
  test-deploy-app test-deploy-app-image

dist-deploy: setup-deploy-py
	@mkdir -p $(DIST_DIR)
	$(SERVER_PY) -c 'import sys; from helm_python import chart; print(chart.package(sys.argv[1], destination=sys.argv[2]))' \
	  $(DEPLOY)/helm/clockflake-server $(DIST_DIR)

TEST_TARGETS += test-deploy
SETUP_TARGETS += setup-deploy-py
DEBIAN_PACKAGES += prometheus
DIST_TARGETS += dist-deploy
