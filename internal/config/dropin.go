package config

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"path/filepath"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"
)

// dropInExt is the suffix of the files of --config-dir that are read.
const dropInExt = ".conf"

// fileLine is where a drop-in file set a field.
type fileLine struct {
	file string
	line int
}

// mergeDropIns applies the drop-in directory dir (--config-dir) over kc as
// the upstream kubelet does: every file ending in .conf in dir and below,
// in lexical order of their paths, is a KubeletConfiguration (apiVersion
// and kind required) merged over the configuration so far as a JSON merge
// patch (RFC 7386: a map merges key by key, a list or a value replaces);
// the defaults are applied again after the last one. Files with another
// suffix are skipped and returned. Each drop-in is decoded as strictly as
// the --config file, its problems naming the drop-in and line, and loc
// learns which drop-in set which field. The returned configuration is new.
func mergeDropIns(kc *kubeletv1beta1.KubeletConfiguration, dir string, e env, loc *locator) (*kubeletv1beta1.KubeletConfiguration, *decoded, []string, Errors, error) {
	var files, skipped []string
	err := e.walkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		if filepath.Ext(d.Name()) != dropInExt {
			skipped = append(skipped, path)
			return nil
		}
		files = append(files, path)
		return nil
	})
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("reading the drop-in directory --config-dir %q: %w", dir, err)
	}
	base, err := json.Marshal(kc)
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("encoding the configuration: %w", err)
	}
	var (
		problems Errors
		all      = &decoded{lines: map[string]int{}}
	)
	for _, path := range files {
		data, err := e.readFile(path)
		if err != nil {
			return nil, nil, nil, nil, fmt.Errorf("reading drop-in config file %q: %w", path, err)
		}
		d, decodeProblems := decode(data)
		for _, p := range decodeProblems {
			p.File = path
		}
		if d == nil {
			return nil, nil, nil, decodeProblems, nil
		}
		problems = append(problems, decodeProblems...)
		all.bad = append(all.bad, d.bad...)
		for p, line := range d.lines {
			loc.dropIns[p] = fileLine{file: path, line: line}
		}
		patch, err := yaml.YAMLToJSON(data)
		if err != nil {
			return nil, nil, nil, nil, fmt.Errorf("drop-in config file %q: %w", path, err)
		}
		if base, err = jsonpatch.MergePatch(base, patch); err != nil {
			return nil, nil, nil, nil, fmt.Errorf("merging drop-in config file %q: %w", path, err)
		}
	}
	merged := &kubeletv1beta1.KubeletConfiguration{}
	if err := json.Unmarshal(base, merged); err != nil {
		return nil, nil, nil, nil, fmt.Errorf("decoding the merged configuration of --config-dir %q: %w", dir, err)
	}
	SetDefaults(merged)
	return merged, all, skipped, problems, nil
}
