package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	yaml "go.yaml.in/yaml/v3"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// MarshalYAML renders kc as a KubeletConfiguration YAML document: apiVersion
// and kind first, then the fields in the order the type declares them.
// Reading the output back gives the same configuration.
func MarshalYAML(kc *kubeletv1beta1.KubeletConfiguration) ([]byte, error) {
	c := kc.DeepCopy()
	c.APIVersion = APIVersion
	c.Kind = Kind
	raw, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encoding KubeletConfiguration: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("reading encoded KubeletConfiguration: %w", err)
	}
	root, err := jsonToYAML(dec, tok)
	if err != nil {
		return nil, fmt.Errorf("reading encoded KubeletConfiguration: %w", err)
	}
	moveFirst(root, "kind")
	moveFirst(root, "apiVersion")
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(root); err != nil {
		return nil, fmt.Errorf("writing KubeletConfiguration YAML: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("writing KubeletConfiguration YAML: %w", err)
	}
	return buf.Bytes(), nil
}

// jsonToYAML builds a YAML node from the JSON value starting at tok,
// keeping object key order.
func jsonToYAML(dec *json.Decoder, tok json.Token) (*yaml.Node, error) {
	switch v := tok.(type) {
	case nil:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}, nil
	case string:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v}, nil
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: fmt.Sprint(v)}, nil
	case json.Number:
		tag := "!!int"
		if strings.ContainsAny(string(v), ".eE") {
			tag = "!!float"
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: string(v)}, nil
	case json.Delim:
		n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		if v == '[' {
			n = &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		}
		for dec.More() {
			next, err := dec.Token()
			if err != nil {
				return nil, err
			}
			if n.Kind == yaml.MappingNode {
				key, ok := next.(string)
				if !ok {
					return nil, fmt.Errorf("object key %v is not a string", next)
				}
				if next, err = dec.Token(); err != nil {
					return nil, err
				}
				n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key})
			}
			child, err := jsonToYAML(dec, next)
			if err != nil {
				return nil, err
			}
			n.Content = append(n.Content, child)
		}
		if _, err := dec.Token(); err != nil {
			return nil, err
		}
		return n, nil
	default:
		return nil, fmt.Errorf("unexpected JSON token %v", tok)
	}
}

// moveFirst moves the entry with the given key to the front of a mapping.
func moveFirst(m *yaml.Node, key string) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			pair := []*yaml.Node{m.Content[i], m.Content[i+1]}
			rest := append(append([]*yaml.Node{}, m.Content[:i]...), m.Content[i+2:]...)
			m.Content = append(pair, rest...)
			return
		}
	}
}
