package main

import (
	"fmt"

	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// ownedCRDs describes each CRD for the CSV from the markers and doc comments of its Go type.
// Every CRD's kind needs a type marker with a displayName, and every field marker must end up
// in a descriptor: a marker the walk cannot reach (under a slice, or on a type no CRD uses) is
// an error, not a silently missing descriptor.
func ownedCRDs(types map[string]*apiType, crds []*apiextensionsv1.CustomResourceDefinition) ([]operatorsv1alpha1.CRDDescription, error) {
	var owned []operatorsv1alpha1.CRDDescription
	for _, crd := range crds {
		desc, err := crdDescription(types, crd)
		if err != nil {
			return nil, fmt.Errorf("crd %s: %w", crd.Name, err)
		}
		owned = append(owned, desc)
	}
	for _, t := range types {
		if t.Marker != nil && !t.Marker.used {
			return nil, fmt.Errorf("%s: csv marker on type %s, which is not the kind of any CRD in the bundle", t.Marker.Pos, t.Name)
		}
		for _, f := range t.Fields {
			if f.Marker != nil && !f.Marker.used {
				return nil, fmt.Errorf("%s: csv marker on %s.%s is not reachable from a CRD's spec or status through struct fields", f.Marker.Pos, t.Name, f.GoName)
			}
		}
	}
	return owned, nil
}

func crdDescription(types map[string]*apiType, crd *apiextensionsv1.CustomResourceDefinition) (operatorsv1alpha1.CRDDescription, error) {
	var none operatorsv1alpha1.CRDDescription
	if len(crd.Spec.Versions) != 1 {
		return none, fmt.Errorf("has %d versions; the descriptors come from one Go API package, so teach hack/bundle which package serves which version first", len(crd.Spec.Versions))
	}
	kind := crd.Spec.Names.Kind
	t, ok := types[kind]
	if !ok || !t.Root {
		return none, fmt.Errorf("no root Go type %s in the API package", kind)
	}
	if t.Marker == nil {
		return none, fmt.Errorf("type %s has no %s marker (displayName, resources)", kind, csvMarkerPrefix)
	}
	t.Marker.used = true
	if err := checkMarkerKeys(t.Marker, "displayName", "resources"); err != nil {
		return none, err
	}
	displayName, err := markerString(t.Marker.Args["displayName"])
	if err != nil || displayName == "" {
		return none, fmt.Errorf("%s: type %s needs displayName=\"...\"", t.Marker.Pos, kind)
	}
	if t.Doc == "" {
		return none, fmt.Errorf("type %s has no doc comment to describe it", kind)
	}
	desc := operatorsv1alpha1.CRDDescription{
		Name:        crd.Name,
		Version:     crd.Spec.Versions[0].Name,
		Kind:        kind,
		DisplayName: displayName,
		Description: t.Doc,
	}
	if raw, ok := t.Marker.Args["resources"]; ok {
		if desc.Resources, err = markerResources(raw); err != nil {
			return none, fmt.Errorf("%s: resources: %w", t.Marker.Pos, err)
		}
	}
	for _, f := range t.Fields {
		var ds []descriptor
		switch f.JSONName {
		case "spec", "status":
			if ds, err = walkDescriptors(types, f.Local, "", f.JSONName); err != nil {
				return none, err
			}
		default:
			continue
		}
		for _, d := range ds {
			if f.JSONName == "spec" {
				desc.SpecDescriptors = append(desc.SpecDescriptors, operatorsv1alpha1.SpecDescriptor{
					Path: d.path, DisplayName: d.displayName, Description: d.description, XDescriptors: d.xDescriptors,
				})
			} else {
				desc.StatusDescriptors = append(desc.StatusDescriptors, operatorsv1alpha1.StatusDescriptor{
					Path: d.path, DisplayName: d.displayName, Description: d.description, XDescriptors: d.xDescriptors,
				})
			}
		}
	}
	return desc, nil
}

// descriptor is a spec or status descriptor before it takes its CSV type.
type descriptor struct {
	path, displayName, description string
	xDescriptors                   []string
}

// walkDescriptors collects the descriptors of the fields of typeName and of the API structs
// below them, in source order. root is "spec" or "status": a marker's type= must match it.
func walkDescriptors(types map[string]*apiType, typeName, prefix, root string) ([]descriptor, error) {
	t, ok := types[typeName]
	if !ok {
		return nil, nil
	}
	var out []descriptor
	for _, f := range t.Fields {
		path := prefix
		if !f.Inline {
			path = joinPath(prefix, f.JSONName)
		}
		if f.Marker != nil && !f.Inline {
			d, err := fieldDescriptor(f, path, root)
			if err != nil {
				return nil, fmt.Errorf("%s.%s: %w", t.Name, f.GoName, err)
			}
			out = append(out, d)
		}
		if f.Local != "" {
			below, err := walkDescriptors(types, f.Local, path, root)
			if err != nil {
				return nil, err
			}
			out = append(out, below...)
		}
	}
	return out, nil
}

func fieldDescriptor(f apiField, path, root string) (descriptor, error) {
	m := f.Marker
	m.used = true
	if err := checkMarkerKeys(m, "type", "displayName", "xDescriptors"); err != nil {
		return descriptor{}, err
	}
	if m.Args["type"] != root {
		return descriptor{}, fmt.Errorf("%s: marker says type=%s but the field is under %s", m.Pos, m.Args["type"], root)
	}
	d := descriptor{path: path, displayName: displayNameOf(f.GoName), description: f.Doc}
	if raw, ok := m.Args["displayName"]; ok {
		name, err := markerString(raw)
		if err != nil {
			return descriptor{}, fmt.Errorf("%s: displayName: %w", m.Pos, err)
		}
		d.displayName = name
	}
	if raw, ok := m.Args["xDescriptors"]; ok {
		xs, err := markerStrings(raw)
		if err != nil {
			return descriptor{}, fmt.Errorf("%s: xDescriptors: %w", m.Pos, err)
		}
		d.xDescriptors = xs
	}
	return d, nil
}

// markerResources reads {{Kind,version,name},...} into CSV resource references.
func markerResources(raw string) ([]operatorsv1alpha1.APIResourceReference, error) {
	items, err := markerList(raw)
	if err != nil {
		return nil, err
	}
	var refs []operatorsv1alpha1.APIResourceReference
	for _, item := range items {
		parts, err := markerStrings(item)
		if err != nil {
			return nil, err
		}
		if len(parts) != 3 {
			return nil, fmt.Errorf("resource %s is not {Kind,version,name}", item)
		}
		refs = append(refs, operatorsv1alpha1.APIResourceReference{Kind: parts[0], Version: parts[1], Name: parts[2]})
	}
	return refs, nil
}

func joinPath(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}
