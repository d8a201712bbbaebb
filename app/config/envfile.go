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
	p := &envParser{lines: strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")}
	for ; p.i < len(p.lines); p.i++ {
		start := p.i + 1
		line := strings.TrimLeft(p.lines[p.i], " \t")
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		name, rest, ok := strings.Cut(line, "=")
		name = strings.TrimRight(name, " \t")
		if !ok {
			p.problem(start, "no NAME=value, ignored")
			continue
		}
		if !envName.MatchString(name) {
			p.problem(start, fmt.Sprintf("%q is not a variable name, ignored", name))
			continue
		}
		rest = strings.TrimLeft(rest, " \t")
		var value string
		closed := true
		switch {
		case strings.HasPrefix(rest, "'"):
			value, closed = p.singleQuoted(name, rest[1:])
		case strings.HasPrefix(rest, `"`):
			value, closed = p.doubleQuoted(name, rest[1:])
		default:
			value = p.unquoted(rest)
		}
		if !closed {
			p.problem(start, name+": the quote is never closed, ignored")
			continue
		}
		vars = slices.DeleteFunc(vars, func(v EnvVar) bool { return v.Name == name })
		vars = append(vars, EnvVar{Name: name, Value: value, Line: start})
	}
	return vars, p.problems
}

// envParser is ParseEnvFile's place in the file: a value may run on over
// several lines, each step below moving i to the line it ends on.
type envParser struct {
	lines    []string
	i        int
	problems []string
}

func (p *envParser) problem(line int, what string) {
	p.problems = append(p.problems, fmt.Sprintf("line %d: %s", line, what))
}

// next moves to the next line and returns it; ok is false at the end of
// the file.
func (p *envParser) next() (line string, ok bool) {
	if p.i+1 >= len(p.lines) {
		return "", false
	}
	p.i++
	return p.lines[p.i], true
}

// singleQuoted reads a value in single quotes, body being what follows the
// opening one: everything up to the closing quote, as it is. closed is false
// when the file ends first.
func (p *envParser) singleQuoted(name, body string) (value string, closed bool) {
	var b strings.Builder
	for {
		if end := strings.IndexByte(body, '\''); end >= 0 {
			b.WriteString(body[:end])
			if trailing := strings.TrimSpace(body[end+1:]); trailing != "" {
				p.problem(p.i+1, name+": text after the closing quote, ignored")
			}
			return b.String(), true
		}
		b.WriteString(body + "\n")
		var ok bool
		if body, ok = p.next(); !ok {
			return b.String(), false
		}
	}
}

// doubleQuoted reads a value in double quotes, body being what follows the
// opening one: a backslash escapes ", \, ` and $, and at the end of a line
// drops the newline. closed is false when the file ends first.
func (p *envParser) doubleQuoted(name, body string) (value string, closed bool) {
	var b strings.Builder
	for {
		continued := false
	line:
		for j := 0; j < len(body); j++ {
			switch c := body[j]; {
			case c == '"':
				if trailing := strings.TrimSpace(body[j+1:]); trailing != "" {
					p.problem(p.i+1, name+": text after the closing quote, ignored")
				}
				return b.String(), true
			case c == '\\' && j+1 < len(body) && strings.IndexByte("\"\\`$", body[j+1]) >= 0:
				b.WriteByte(body[j+1])
				j++
			case c == '\\' && j+1 == len(body):
				// A line continuation: the newline is dropped.
				continued = true
				break line
			default:
				b.WriteByte(c)
			}
		}
		if !continued {
			b.WriteByte('\n')
		}
		var ok bool
		if body, ok = p.next(); !ok {
			return b.String(), false
		}
	}
}

// unquoted reads a value without quotes: a backslash keeps the character
// after it and at the end of a line continues the value on the next;
// trailing blanks are dropped.
func (p *envParser) unquoted(body string) string {
	var b strings.Builder
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
			b.WriteByte(body[j])
		}
		if !cont {
			break
		}
		var ok bool
		if body, ok = p.next(); !ok {
			break
		}
	}
	return strings.TrimRight(b.String(), " \t\r")
}
