package rest

import (
	"fmt"
	"net/http"
	"path"
	"strings"

	"github.com/claimstream/claimstream/schemas"
)

// SchemaPath is where the API serves the event schemas: the path of every
// dataschema identifier (events.SchemaURL), so an identifier's path
// resolved against a claimstream API fetches the schema it names.
const SchemaPath = "/schemas/events/"

// schema answers GET /schemas/events/{file}: a JSON Schema of
// schemas/events (an event type's, or the shared defs.v1.json), without
// a token: the schemas are public, as the repository's are.
func (s *server) schema(w http.ResponseWriter, r *http.Request) {
	file := r.PathValue("file")
	if !strings.HasSuffix(file, ".json") || path.Base(file) != file || strings.HasPrefix(file, ".") {
		writeError(w, http.StatusNotFound, "NotFound", fmt.Sprintf("no schema %q: the schemas are %s<Type>.v1.json and %sdefs.v1.json", file, SchemaPath, SchemaPath))
		return
	}
	b, err := schemas.FS.ReadFile("events/" + file)
	if err != nil {
		writeError(w, http.StatusNotFound, "NotFound", fmt.Sprintf("no schema %q: the schemas are %s<Type>.v1.json (a type of docs/events.md) and %sdefs.v1.json", file, SchemaPath, SchemaPath))
		return
	}
	w.Header().Set("Content-Type", "application/schema+json")
	w.Header().Set("Cache-Control", "public, max-age=3600")
	_, _ = w.Write(b)
}
