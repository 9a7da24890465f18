package sinks

import (
	"errors"
	"io/fs"
)

// ParseConfigWith is ParseConfig with its environment and files given:
// the fuzz target reads nothing of the machine's.
func ParseConfigWith(b []byte, env, files map[string]string) (Config, error) {
	return parseConfig("sinks file", b, secretSources{
		lookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		readFile: func(p string) ([]byte, error) {
			if v, ok := files[p]; ok {
				return []byte(v), nil
			}
			return nil, errors.New(p + ": " + fs.ErrNotExist.Error())
		},
	})
}
