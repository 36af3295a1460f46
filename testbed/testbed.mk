# Testbed targets, included by the top-level Makefile (`include testbed/testbed.mk`).
# Boxes are Debian 12 VMs under qemu; see testbed/README.md for what each costs.
BOXES ?= 2
MEM ?= 2048
SMP ?= 1
TESTBED_ENV = BOXES=$(BOXES) MEM=$(MEM) SMP=$(SMP)

.PHONY: testbed-deps testbed-image testbed-up testbed-down e2e experiment

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
