//go:build !linux

package serve

func dropExecutableCodePages() ([]codeMapping, error) { return nil, errNoCodePages }
