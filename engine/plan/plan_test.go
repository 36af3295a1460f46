package plan

import "testing"

func TestActionOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    Change
		want Action
	}{
		{"set by the module", Change{Kind: KindFile, Action: Delete}, Delete},
		{"sysctl value", Change{Kind: KindSysctl, Before: "0", After: "3013"}, Update},
		{"restart", Change{Kind: KindRestart, Before: "a", After: "b"}, Restart},
		{"new file by its diff", Change{Kind: KindFile, Before: "", After: "x\n", Diff: "--- /dev/null\n+++ b/f\n@@ -0,0 +1 @@\n+x\n"}, Create},
		{"new file by its content", Change{Kind: KindFile, After: "x\n", Diff: "--- f\n+++ f\n@@ -0,0 +1 @@\n+x\n"}, Create},
		{"file removed", Change{Kind: KindFile, Before: "x\n", Diff: "--- a/f\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n"}, Delete},
		{"file edited", Change{Kind: KindFile, Before: "x\n", After: "y\n", Diff: "--- a/f\n+++ b/f\n"}, Update},
		{"other action", Change{Kind: KindAction, Target: "f:3", Before: "a", After: "b"}, Update},
	} {
		if got := ActionOf(tc.c); got != tc.want {
			t.Errorf("%s: ActionOf = %s, want %s", tc.name, got, tc.want)
		}
	}
}
