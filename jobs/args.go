package jobs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/stockhold/stockhold/app/alerts"
)

// DecodeArgs decodes a job's JSON args into T strictly, and returns why it
// refuses them. River decodes args leniently (encoding/json's defaults), so
// a job inserted by hand with a misspelt field ("dryrun", "pol",
// "held_befor") would run with that field's default instead: a dry run
// becomes a real rollback. DecodeArgs refuses
//   - anything but a JSON object;
//   - a field T does not have, spelt exactly as its JSON name (encoding/json
//     would also take "Dry_Run" for "dry_run");
//   - a value of the wrong type (a string for a boolean, a fraction or a
//     string for a number);
//   - null, except for a field that may be absent (pointer, slice, map);
//   - a field given with the value that makes Go leave it out (omitempty:
//     "", 0, false, []): such a field means "absent", so giving it is either
//     a mistake or ambiguous ("campaign": "" next to "sku");
//   - args whose Validate method (when T has one) fails.
//
// Args that Go marshalled from T always pass.
func DecodeArgs[T any](raw []byte) (T, error) {
	var args T
	var given map[string]json.RawMessage
	if err := json.Unmarshal(raw, &given); err != nil || given == nil {
		return args, errors.New("args must be a JSON object")
	}
	fields := jsonFields(reflect.TypeOf(args))
	names := make([]string, 0, len(given))
	for name := range given {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if _, ok := fields[name]; !ok {
			return args, fmt.Errorf("unknown field %q (the fields are %s)", name, fieldList(fields))
		}
	}
	t := reflect.TypeOf(args)
	for _, name := range names {
		// One field at a time, so that the error names the field.
		f := fields[name]
		if bytes.Equal(bytes.TrimSpace(given[name]), []byte("null")) && !f.nullable {
			return args, fmt.Errorf("field %q is null: give a value or leave the field out", name)
		}
		v := reflect.New(t.FieldByIndex(f.index).Type)
		if err := json.Unmarshal(given[name], v.Interface()); err != nil {
			return args, fmt.Errorf("field %q: %s", name, strings.TrimPrefix(err.Error(), "json: "))
		}
		if f.omitted(v.Elem()) {
			return args, fmt.Errorf("field %q is given empty (%s): leave the field out instead", name, given[name])
		}
	}
	if err := json.Unmarshal(raw, &args); err != nil {
		return args, errors.New(strings.TrimPrefix(err.Error(), "json: "))
	}
	if a, ok := any(args).(interface{ Validate() error }); ok {
		if err := a.Validate(); err != nil {
			return args, err
		}
	}
	return args, nil
}

// jsonField is what DecodeArgs needs to know of a struct field.
type jsonField struct {
	index     []int
	omitEmpty bool
	omitZero  bool
	nullable  bool
}

// omitted reports whether encoding/json would leave v out.
func (f jsonField) omitted(v reflect.Value) bool {
	if f.omitZero && v.IsZero() {
		return true
	}
	if !f.omitEmpty {
		return false
	}
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool:
		return !v.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int() == 0
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return v.Uint() == 0
	case reflect.Float32, reflect.Float64:
		return v.Float() == 0
	case reflect.Interface, reflect.Pointer:
		return v.IsNil()
	}
	return false
}

// jsonFields maps the JSON names of struct type t's exported fields to them.
// The fields of an embedded struct without a JSON name are t's own, as
// encoding/json promotes them (rollbacks.ManualRollbackArgs embeds its
// Scope).
func jsonFields(t reflect.Type) map[string]jsonField {
	out := map[string]jsonField{}
	if t == nil || t.Kind() != reflect.Struct {
		return out
	}
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if sf.Anonymous && sf.Type.Kind() == reflect.Struct && tag == "" {
			for name, f := range jsonFields(sf.Type) {
				f.index = append([]int{i}, f.index...)
				out[name] = f
			}
			continue
		}
		if !sf.IsExported() || tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = sf.Name
		}
		f := jsonField{index: sf.Index}
		for _, o := range strings.Split(opts, ",") {
			f.omitEmpty = f.omitEmpty || o == "omitempty"
			f.omitZero = f.omitZero || o == "omitzero"
		}
		switch sf.Type.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Interface:
			f.nullable = true
		}
		out[name] = f
	}
	return out
}

func fieldList(fields map[string]jsonField) string {
	if len(fields) == 0 {
		return "none: give {}"
	}
	names := make([]string, 0, len(fields))
	for n := range fields {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// register adds w to workers for its kind, with the kind's timeout, behind
// the strict decoding of its args: a job whose args DecodeArgs refuses is
// cancelled at once (no retry mends it) with a critical alert, and its
// worker never runs. River decodes args before it calls the worker, and a
// decoding error would count as a failed attempt (retried, then discarded),
// so the check is a worker middleware, which River runs before decoding.
//
// The timeout also decides when a job whose instance died is run again:
// River's rescuer leaves a running job alone until both
// RescueStuckJobsAfter and the kind's timeout have passed since it started.
func register[T river.JobArgs](workers *river.Workers, w river.Worker[T], timeout time.Duration, al *alerts.Service) {
	river.AddWorker(workers, &strictWorker[T]{Worker: w, timeout: timeout, alerts: al})
}

// strictWorker is a worker whose args are decoded strictly first.
type strictWorker[T river.JobArgs] struct {
	river.Worker[T]
	timeout time.Duration
	alerts  *alerts.Service
}

// Timeout bounds one attempt of the kind.
func (w *strictWorker[T]) Timeout(*river.Job[T]) time.Duration { return w.timeout }

// Middleware checks the args before River decodes them.
func (w *strictWorker[T]) Middleware(*rivertype.JobRow) []rivertype.WorkerMiddleware {
	return []rivertype.WorkerMiddleware{river.WorkerMiddlewareFunc(
		func(ctx context.Context, job *rivertype.JobRow, doInner func(context.Context) error) error {
			if _, err := DecodeArgs[T](job.EncodedArgs); err != nil {
				return refuseJob(ctx, w.alerts, job, err)
			}
			return doInner(ctx)
		})}
}

// Alert kinds of refused jobs.
const (
	// AlertManualRollbackRefused is a manual_rollback job that was cancelled
	// and released nothing.
	AlertManualRollbackRefused = "manual_rollback_refused"
	// AlertJobArgsInvalid is any other job cancelled for its args.
	AlertJobArgsInvalid = "job_args_invalid"
)

// refuseJob cancels job for why, with a critical alert naming the problem.
// When the alert cannot be raised the attempt fails instead (and is
// retried): a refusal must be seen.
func refuseJob(ctx context.Context, al *alerts.Service, job *rivertype.JobRow, why error) error {
	kind, action := AlertJobArgsInvalid, fmt.Sprintf(
		"A %s job was cancelled without running: %v. Nothing was done. Fix the args and enqueue it again "+
			"(the job dashboard shows them; each kind's args type in the code says its fields).", job.Kind, why)
	if job.Kind == "manual_rollback" {
		kind, action = AlertManualRollbackRefused, fmt.Sprintf(
			"A manual rollback job was refused and nothing was released: %v. Enqueue it again with an operator, "+
				"a reason and exactly one scope, spelt as in sql/manual_rollback.sql.", why)
	}
	args := json.RawMessage(job.EncodedArgs)
	if !json.Valid(args) {
		args, _ = json.Marshal(string(job.EncodedArgs))
	}
	_, err := al.Raise(context.WithoutCancel(ctx), alerts.Raise{
		Level:   alerts.Critical,
		Kind:    kind,
		Subject: fmt.Sprintf("job:%d", job.ID),
		Details: map[string]any{"job_id": job.ID, "job_kind": job.Kind, "error": why.Error(), "args": args},
		Action:  action,
	})
	if err != nil {
		return fmt.Errorf("refuse %s job %d (%v): raise its alert: %w", job.Kind, job.ID, why, err)
	}
	return river.JobCancel(fmt.Errorf("%s job refused: %w", job.Kind, why))
}
