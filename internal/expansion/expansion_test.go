package expansion

import "testing"

func TestExpand(t *testing.T) {
	env := map[string]string{"A": "apple", "B": "banana", "EMPTY": ""}
	tests := []struct {
		in, want string
	}{
		{"plain", "plain"},
		{"$(A)", "apple"},
		{"x-$(A)-$(B)-y", "x-apple-banana-y"},
		{"$(MISSING)", "$(MISSING)"},
		{"$$(A)", "$(A)"},
		{"$$$(A)", "$apple"},
		{"$$", "$"},
		{"$", "$"},
		{"a$b", "a$b"},
		{"$(A", "$(A"},
		{"$()", "$()"},
		{"$(EMPTY)x", "x"},
		{"$(A)$(A)", "appleapple"},
		{"trailing $", "trailing $"},
	}
	for _, tt := range tests {
		if got := Expand(tt.in, MapLookup(env)); got != tt.want {
			t.Errorf("Expand(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func FuzzExpand(f *testing.F) {
	for _, s := range []string{"$(A)", "$$(A)", "$(", "x$y", "$$$"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		// With nothing defined, expansion only ever removes the escape
		// dollar of "$$", so the output is never longer than the input.
		out := Expand(s, func(string) (string, bool) { return "", false })
		if len(out) > len(s) {
			t.Fatalf("Expand(%q) grew to %q", s, out)
		}
	})
}
