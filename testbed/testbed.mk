# Testbed targets, included by the top-level Makefile (`include testbed/testbed.mk`).
# Boxes are Debian 12 VMs under qemu; see testbed/README.md for what each costs.
BOXES ?= 2
MEM ?= 2048
SMP ?= 1
TESTBED_ENV = BOXES=$(BOXES) MEM=$(MEM) SMP=$(SMP)

.PHONY: testbed-deps testbed-image testbed-up testbed-down e2e experiment e2e-oom e2e-gigpages

testbed-deps:
	./scripts/deps.sh testbed

testbed-image: testbed-deps
	testbed/build-image.sh

testbed-up: testbed-deps
	$(TESTBED_ENV) testbed/up.sh

testbed-down:
	testbed/down.sh

e2e: build testbed-deps
	$(TESTBED_ENV) testbed/e2e.sh

experiment: build testbed-deps
	testbed/experiment.sh

# Focused runs on one box each (oom: 3072 MiB, gigpages: 6144 MiB by default): the oom module's
# systemd drop-in, and 1 GiB huge pages (TCG's -cpu max offers them).
e2e-oom: build testbed-deps
	testbed/oom-unit.sh

e2e-gigpages: build testbed-deps
	testbed/gigpages.sh
