package playbook_test

import (
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/playbook"
	"github.com/pgtune/pgtune/modules/registry"
	"github.com/pgtune/pgtune/playbooks"
)

// The embedded default policy loads with the real modules, and a typo in
// it is caught with its position, as `pgtune validate` shows it.
func TestDefaultPolicy(t *testing.T) {
	_, reg := engine.Registry(registry.All()...)
	pb, err := playbook.Parse("memory.yml", playbooks.Default, reg)
	if err != nil {
		t.Fatal(err)
	}
	if len(pb.Plays) == 0 || len(pb.Plays[0].Policy) != len(registry.All()) { // every module is in the default policy
		t.Fatalf("default policy: %+v", pb.Plays)
	}
	bad := strings.Replace(string(playbooks.Default), "restart: true", "restartt: true", 1)
	if bad == string(playbooks.Default) {
		t.Skip("default policy changed shape; typo injection not applicable")
	}
	_, err = playbook.Parse("memory.yml", []byte(bad), reg)
	if err == nil || !strings.Contains(err.Error(), `unknown key "restartt" in pgconf`) || !strings.HasPrefix(err.Error(), "memory.yml:") {
		t.Errorf("typo: %v", err)
	}
}
