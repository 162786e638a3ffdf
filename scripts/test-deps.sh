#!/usr/bin/env bash
# Installs the external tools the tests use to check the service independently of
# the code under test: poppler-utils (pdftoppm, pdftotext, pdfinfo) and the
# zxing-cpp barcode decoder (+ Pillow) for the labels, and the Standard Webhooks
# reference library (PyPI standardwebhooks) for webhook signatures, the Prometheus client
# library's OpenMetrics parser (PyPI prometheus_client) for /metrics, Schemathesis (PyPI,
# pinned: its configuration format moves) for the OpenAPI fuzzing, openapi-python-client (PyPI,
# pinned) to generate a client from docs/openapi.json and drive the server with it; Debian's chromium and
# chromium-driver, and axe-core from npm (into target/browser-deps), for the dashboard's
# browser tests; and a real OSRM routing engine (scripts/osrm.sh, from PyPI's osrm-bindings
# wheel) for the road-time tests; aiosmtpd (PyPI, pinned) as the real SMTP server of the notification tests;
# lintian and systemd (systemd-analyze) for the Debian package test. (The container test,
# scripts/container-test.sh, installs Debian's podman, runc, podman-compose and debootstrap
# itself, so that it also runs alone.)
# Idempotent: each step runs only when its tool is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then
    SUDO="sudo"
fi

if ! command -v pdftoppm >/dev/null 2>&1 || ! command -v pdftotext >/dev/null 2>&1 \
    || [ ! -f /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] \
    || [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then
    $SUDO apt-get update
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y poppler-utils fonts-dejavu-core chromium chromium-driver
fi

# axe-core, pinned, into a git-ignored folder the browser tests read (tests/it/browser.rs).
AXE_DIR=target/browser-deps
if [ ! -f "$AXE_DIR/node_modules/axe-core/axe.min.js" ]; then
    if ! command -v npm >/dev/null 2>&1; then
        $SUDO apt-get update
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y npm
    fi
    mkdir -p "$AXE_DIR"
    npm install --silent --no-audit --no-fund --prefix "$AXE_DIR" axe-core@4.11.0
fi

if ! python3 -c 'import zxingcpp, PIL, standardwebhooks, prometheus_client, schemathesis' >/dev/null 2>&1; then
    # A distribution Python may refuse plain pip installs (PEP 668).
    python3 -m pip install --quiet zxing-cpp pillow standardwebhooks prometheus_client schemathesis==4.32.5 \
        || python3 -m pip install --quiet --break-system-packages zxing-cpp pillow standardwebhooks prometheus_client \
            schemathesis==4.32.5
fi

# The OpenAPI test generates a Python client from docs/openapi.json with the real generator.
if ! command -v openapi-python-client >/dev/null 2>&1; then
    python3 -m pip install --quiet openapi-python-client==0.29.1 httpx \
        || python3 -m pip install --quiet --break-system-packages openapi-python-client==0.29.1 httpx
fi

# A real SMTP server for the recipient notification tests (tests/smtp_server.py, pinned).
if ! python3 -c 'import aiosmtpd' >/dev/null 2>&1; then
    python3 -m pip install --quiet aiosmtpd==1.4.6 \
        || python3 -m pip install --quiet --break-system-packages aiosmtpd==1.4.6
fi

# The Debian package test (scripts/deb-test.sh): lintian checks the package, systemd-analyze
# (from Debian's systemd package) verifies the unit and rates its sandboxing.
if ! command -v lintian >/dev/null 2>&1 || ! command -v systemd-analyze >/dev/null 2>&1; then
    $SUDO apt-get update
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y lintian systemd
fi

# OSRM's executables and car profile, into ~/.cache/dropslot (tests/it/roads.rs finds them there).
scripts/osrm.sh >/dev/null

command -v pdftoppm >/dev/null
command -v lintian >/dev/null && command -v systemd-analyze >/dev/null
[ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]
[ -f "$AXE_DIR/node_modules/axe-core/axe.min.js" ]
python3 -c 'import zxingcpp, PIL, standardwebhooks, prometheus_client, schemathesis'
python3 -c 'import aiosmtpd'
command -v schemathesis >/dev/null
command -v openapi-python-client >/dev/null
echo "test-deps: ok"
