//go:build !linux

package main

func dropExecutableCodePages() ([]codeMapping, error) { return nil, errNoCodePages }
