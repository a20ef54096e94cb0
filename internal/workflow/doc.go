// Package workflow reads gpusched's YAML workflow files into scheduling
// settings and task specs. It walks the YAML tree itself rather than
// unmarshalling into structs, so that every error, structural or semantic,
// names the file and the line, and an unknown key (a typo) is an error with
// a suggestion instead of being silently ignored.
//
// An invalid file gives every problem at once (an *ErrorList, one located
// *Error per problem, in file order), each told once: the parser goes on
// after a problem, and a field or task that already had one is not blamed
// again by the checks that follow.
//
// What saves writing is expanded here, at load time, into ordinary task
// specs, so that nothing downstream knows of it: defaults: (defaults.go),
// a task's matrix: with its ${name} templates (sweep.go), and globs among
// the dependencies (globs.go), each with the condition its item gives
// (dependencies.go). docs/workflow.md is their user's guide.
package workflow
