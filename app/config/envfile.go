package config

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// EnvVar is one assignment read from an environment file.
type EnvVar struct {
	Name, Value string
	// Line is the line the assignment starts on, from 1.
	Line int
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ParseEnvFile reads an environment file the way systemd's
// EnvironmentFile= does (systemd.exec(5)): NAME=value lines; blank lines
// and lines starting with # or ; are comments; a value in single quotes is
// taken verbatim, one in double quotes with the shell's backslash escapes
// (\" \\ \` \$, and a backslash-newline joins lines); an unquoted value has
// its leading and trailing blanks dropped and a backslash keeps the next
// character (a trailing one joins the next line). A quoted value may span
// lines. It returns the assignments in order (a name given twice keeps
// its last value, as systemd does) and what it could not read, by line.
func ParseEnvFile(text string) (vars []EnvVar, problems []string) {
	lines := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		start := i + 1
		line := strings.TrimLeft(lines[i], " \t")
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		name, rest, ok := strings.Cut(line, "=")
		name = strings.TrimRight(name, " \t")
		if !ok {
			problems = append(problems, fmt.Sprintf("line %d: no NAME=value, ignored", start))
			continue
		}
		if !envName.MatchString(name) {
			problems = append(problems, fmt.Sprintf("line %d: %q is not a variable name, ignored", start, name))
			continue
		}
		rest = strings.TrimLeft(rest, " \t")
		var (
			value  strings.Builder
			closed = true
		)
		switch {
		case strings.HasPrefix(rest, "'"):
			body := rest[1:]
			for {
				if end := strings.IndexByte(body, '\''); end >= 0 {
					value.WriteString(body[:end])
					if trailing := strings.TrimSpace(body[end+1:]); trailing != "" {
						problems = append(problems, fmt.Sprintf("line %d: %s: text after the closing quote, ignored", i+1, name))
					}
					break
				}
				value.WriteString(body + "\n")
				if i+1 >= len(lines) {
					closed = false
					break
				}
				i++
				body = lines[i]
			}
		case strings.HasPrefix(rest, `"`):
			body := rest[1:]
		double:
			for {
				for j := 0; j < len(body); j++ {
					switch c := body[j]; {
					case c == '"':
						if trailing := strings.TrimSpace(body[j+1:]); trailing != "" {
							problems = append(problems, fmt.Sprintf("line %d: %s: text after the closing quote, ignored", i+1, name))
						}
						break double
					case c == '\\' && j+1 < len(body) && strings.IndexByte("\"\\`$", body[j+1]) >= 0:
						value.WriteByte(body[j+1])
						j++
					case c == '\\' && j+1 == len(body):
						// A line continuation: the newline is dropped.
						goto next
					default:
						value.WriteByte(c)
					}
				}
				value.WriteByte('\n')
			next:
				if i+1 >= len(lines) {
					closed = false
					break
				}
				i++
				body = lines[i]
			}
		default:
			body := rest
			for {
				cont := false
				for j := 0; j < len(body); j++ {
					if body[j] == '\\' {
						if j+1 == len(body) {
							cont = true
							break
						}
						j++
					}
					value.WriteByte(body[j])
				}
				if !cont || i+1 >= len(lines) {
					break
				}
				i++
				body = lines[i]
			}
			v := strings.TrimRight(value.String(), " \t\r")
			value.Reset()
			value.WriteString(v)
		}
		if !closed {
			problems = append(problems, fmt.Sprintf("line %d: %s: the quote is never closed, ignored", start, name))
			continue
		}
		vars = slices.DeleteFunc(vars, func(v EnvVar) bool { return v.Name == name })
		vars = append(vars, EnvVar{Name: name, Value: value.String(), Line: start})
	}
	return vars, problems
}
