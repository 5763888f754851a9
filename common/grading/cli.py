"""The instructor sub-commands of ``dfa``: release, check, publish, collect, autograde, sandbox, grade-one,
feedback, grades, export.

Each one is a thin layer over its module: parse, call, print one line per result, return the exit code
(0 fine, 1 something to fix, 2 bad input — raised as DFAError and printed by common/cli/__init__.py).
Only the standard library is imported up here: ``dfa --help`` must not wait for traitlets or nbgrader.
A LAB argument may be a unique prefix (``lab1``); ``Course.require_lab`` resolves it.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time
from pathlib import Path

from common.errors import DFAError

LAB_HELP = "a lab of COURSE, or a unique prefix of its name (lab1 = lab1_landscape)"


def _names_a_full_disk(command):
    """A full disk (ENOSPC, EDQUOT; SQLite's 'database or disk is full') anywhere under ``command`` becomes one
    line saying so, where, how much is free and what to do, and exit code 1, instead of a traceback."""

    @functools.wraps(command)
    def run(args) -> int:
        from common.grading.gradebook import inputs

        try:
            return command(args)
        except Exception as exc:
            cause = exc if inputs.is_disk_full(exc) else exc.__cause__ or exc.__context__
            if inputs.is_disk_full(cause):
                print(inputs.disk_full_message(cause), file=sys.stderr)
                return 1
            if "database or disk is full" in str(exc):
                db = getattr(args, "course", None) or "."
                print(inputs.disk_full_message(OSError(28, "disk full", f"{db} (its gradebook)")), file=sys.stderr)
                return 1
            raise

    return run


def _release(args) -> int:
    from common.grading.authoring.release import readme_updates, release
    from common.grading.courses.course import courses_from_args, quiet_nbgrader

    courses = courses_from_args(args.course)
    with quiet_nbgrader():
        released = release(courses, force=args.force)
    for item in released:
        note = " (source notebook rewritten from its .py)" if item.source_written else ""
        note += f" (the hand-edited release notebook it replaced is kept in {item.backup})" if item.backup else ""
        print(f"released {item.course}/{item.lab} -> {item.path}{note}")
    for readme in readme_updates(courses, write=True):
        print(f"updated the lab table in {readme}")
    if not released:
        print("no labs to release (add courseN_*/source/<lab>/<lab>.py)")
    return 0


def _check(args) -> int:
    from common.grading.authoring.check import check
    from common.grading.courses.course import courses_from_args, quiet_nbgrader

    if args.published or args.execute or args.lab:
        from common.grading.editions.publish_cli import check_published

        return check_published(args)
    courses = courses_from_args(args.course)
    with quiet_nbgrader():
        problems = check(courses)
    for problem in problems:
        print(problem)
    labs = sum(len(c.labs()) for c in courses)
    print(f"dfa check: {labs} lab(s) in {len(courses)} course(s), {len(problems)} problem(s)")
    return 1 if problems else 0


def _publish(args) -> int:
    from common.grading.editions.publish_cli import publish

    return publish(args)


def _collect(args) -> int:
    from common.grading.courses.course import find_course
    from common.grading.gradebook.collect import collect

    course = find_course(args.course)
    lab = course.require_lab(args.lab)
    cap = {} if args.max_notebook_mb is None else {"max_notebook_mb": args.max_notebook_mb}
    report = collect(course, lab, Path(args.source), pattern=args.pattern, **cap)
    for note in report.notes:
        print(f"note: {note}")
    for skipped in report.skipped:
        print(f"skipped: {skipped}")
    skipped = f"; {len(report.skipped)} skipped (above)" if report.skipped else ""
    print(
        f"collected {len(report.students)} submission(s) of {lab}: {', '.join(report.students) or '-'}{skipped}"
    )
    return 0 if report.students and not report.skipped else 1  # a skipped notebook may be a student left out


def _autograde(args) -> int:
    from common.grading.courses.course import find_course, quiet_nbgrader
    from common.grading.gradebook.autograde import NOT_SCORED, autograde
    from common.grading.gradebook.executors import check_target, describe, tls_files
    from common.grading.sandbox.limits import GB, Limits

    tls = tls_files(args.tls_ca_file, args.tls_cert, args.tls_key)
    check_target(args.scheduler, args.cluster, tls)
    if args.workers is not None and (args.scheduler or args.cluster):
        raise DFAError("--workers sizes the local pool: with --scheduler or --cluster the Dask workers run it")
    workers = min(4, os.cpu_count() or 1) if args.workers is None else args.workers
    if workers < 1:
        raise DFAError(f"--workers must be at least 1, got {workers}")
    course = find_course(args.course)
    limits = Limits()
    if args.timeout is not None or args.memory is not None:
        limits = Limits(
            cell_timeout_s=args.timeout or int(course.config.Execute.get("timeout", 120)),
            memory_bytes=int((args.memory or limits.memory_bytes / GB) * GB),
        )
    else:
        limits = None  # the course's nbgrader_config.py decides the cell timeout
    if args.unsafe_no_sandbox:
        print(
            "WARNING: --unsafe-no-sandbox: student code runs with your permissions, unisolated.",
            file=sys.stderr,
        )
    started = time.monotonic()
    with quiet_nbgrader():
        graded = autograde(
            course,
            args.lab,
            workers=workers,
            limits=limits,
            unsafe_no_sandbox=args.unsafe_no_sandbox,
            students=args.student,
            report=lambda g: print(g.line(), flush=True),
            announce=lambda line: print(f"sandbox: {line}", flush=True),
            scheduler=args.scheduler,
            cluster=args.cluster,
            tls=tls,
        )
    elapsed = time.monotonic() - started
    failed = [g for g in graded if g.status in NOT_SCORED]
    rate = len(graded) / elapsed * 60 if elapsed else 0.0
    print(
        f"graded {len(graded) - len(failed)} of {len(graded)} submission(s) in {elapsed:.0f} s "
        f"({rate:.1f}/min, {describe(workers, args.scheduler, args.cluster)}); grades are in {course.db_url}"
    )
    return 1 if failed else 0


def _feedback(args) -> int:
    from common.grading.courses.course import find_course, quiet_nbgrader
    from common.grading.gradebook.feedback import generate_feedback

    with quiet_nbgrader():
        pages, problems = generate_feedback(find_course(args.course), args.lab)
    for problem in problems:
        print(problem)
    print(f"wrote {len(pages)} feedback page(s)" + (f" under {pages[0].parents[2]}" if pages else ""))
    return 1 if problems else 0


def _grades(args) -> int:
    from common.grading.courses.course import find_course, quiet_nbgrader
    from common.grading.gradebook import stale
    from common.grading.gradebook.grades import export

    course = find_course(args.course)
    with quiet_nbgrader():
        csv, pngs = export(course, Path(args.csv) if args.csv else None)
    print(f"wrote {csv}")
    for png in pngs:
        print(f"wrote {png}")
    warnings = stale.lines(course)
    for line in warnings:
        print(f"warning: {line}", file=sys.stderr)
    if warnings:
        print(f"{len(warnings)} submission(s) stale: their rows read 'stale' in {csv}", file=sys.stderr)
    return 1 if warnings else 0


def _grade_one(args) -> int:
    from common.grading.gradebook.grade_one import grade_one

    if args.unsafe_no_sandbox:
        print("WARNING: --unsafe-no-sandbox: student code runs with your permissions, unisolated.",
              file=sys.stderr)
    result = grade_one(args.lab, Path(args.submission), Path(args.out), unsafe_no_sandbox=args.unsafe_no_sandbox)
    print(f"{result['course']}/{result['lab']}: {result['score']:.1f} / {result['max_score']:.1f} "
          f"{result['status']} {result['message']}".rstrip() + f"; wrote {Path(args.out) / 'result.json'}")
    return 1 if result["status"] in ("grading_error", "refused", "worker_lost") else 0


def _export(args) -> int:
    from common.grading.courses.course import find_course

    course = find_course(args.course)
    if args.platform == "coursera":
        from common.grading.platforms import coursera

        written = coursera.export(course, Path(args.out), parts=args.part or [], force=args.force,
                                  timeout_s=args.timeout, memory_gb=args.memory)
        print(f"wrote the Coursera grader for {course.name} ({', '.join(course.labs())}) into {args.out}: "
              f"{', '.join(p.name for p in written)}; build it with `docker build {args.out}`")
    else:
        from common.grading.platforms import gradescope

        zip_path = gradescope.export(course, args.lab, Path(args.out), force=args.force, timeout_s=args.timeout,
                                     memory_gb=args.memory)
        print(f"wrote {zip_path}: upload it as the assignment's autograder (1 CPU, {args.memory:g} GB, "
              f"timeout {args.timeout} s or more)")
    return 0


def _sandbox(args) -> int:
    from common.grading.sandbox import acl

    lines = acl.setup(dry_run=args.dry_run) if args.action == "setup" else acl.undo()
    for line in lines:
        print(line)
    return 0


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "release", help="render source/<lab>/<lab>.py, then generate the student notebooks (nbgrader) + Colab"
    )
    p.add_argument("course", nargs="*", help="course folders (default: every courseN_* folder)")
    p.add_argument("--force", action="store_true",
                   help="overwrite a source notebook edited after its .py, or a release notebook edited by hand "
                        "since the last release (a backup of the latter is kept)")
    p.set_defaults(func=_names_a_full_disk(_release))

    p = sub.add_parser(
        "check", help="validate labs: nbgrader metadata, standard sections, release current, no leaks"
    )
    p.add_argument("course", nargs="*", help="course folders (default: all, and the README lab tables)")
    p.add_argument("--published", metavar="OUT",
                   help="instead, prove the student edition in OUT (dfa publish) holds nothing graded")
    p.add_argument("--execute", action="store_true",
                   help="with --published: also run its release notebooks in a fresh venv holding only OUT")
    p.add_argument("--lab", action="append", help="with --execute: run only this lab (repeatable)")
    p.set_defaults(func=_check)

    p = sub.add_parser("publish", help="write the student edition into OUT: release notebooks, package, README")
    p.add_argument("out", metavar="OUT", help="an empty folder, or a clone of the published repository")
    p.add_argument("course", nargs="*", help="course folders (default: every courseN_* folder)")
    p.add_argument("--repo", metavar="OWNER/NAME", help="published repository (default: [tool.dfa] published_repo)")
    p.add_argument("--force", action="store_true", help="replace what a previous dfa publish wrote in OUT")
    p.set_defaults(func=_publish)

    p = sub.add_parser(
        "collect", help="put downloaded submissions (LMS zip or folder) into COURSE/submitted/"
    )
    p.add_argument("course")
    p.add_argument("lab", help=LAB_HELP)
    p.add_argument("source", metavar="ZIP_OR_DIR")
    p.add_argument(
        "--pattern", help="regular expression naming the student: must contain (?P<student_id>...)"
    )
    p.add_argument("--max-notebook-mb", type=float, metavar="MB",
                   help="skip a notebook larger than this (default 20: collect.MAX_NOTEBOOK_MB)")
    p.set_defaults(func=_names_a_full_disk(_collect))

    p = sub.add_parser("autograde", help="grade every submission of a lab, each in a sandbox")
    p.add_argument("course")
    p.add_argument("lab", help=LAB_HELP)
    p.add_argument(
        "--workers",
        type=int,
        help="submissions graded at the same time on this machine (default: CPU cores, at most 4)",
    )
    p.add_argument("--scheduler", metavar="tls://HOST:PORT",
                   help="run the sandboxes on this Dask scheduler's workers (pip install -e '.[cluster]'); another "
                        "machine's only over TLS with a client certificate (tcp:// only on loopback)")
    p.add_argument("--tls-ca-file", metavar="PEM", help="with a tls:// --scheduler: the CA that signed its certificate")
    p.add_argument("--tls-cert", metavar="PEM", help="with a tls:// --scheduler: this client's certificate")
    p.add_argument("--tls-key", metavar="PEM", help="with a tls:// --scheduler: this client's private key")
    p.add_argument("--cluster", metavar="local:N",
                   help="run the sandboxes on a Dask LocalCluster of N worker processes started here")
    p.add_argument("--timeout", type=int, help="seconds one cell may run (default: the course config, 120)")
    p.add_argument(
        "--memory", type=float, help="GB of memory for one submission (default 4; at least 2 for torch)"
    )
    p.add_argument("--student", action="append", help="grade only this student (repeatable)")
    p.add_argument(
        "--unsafe-no-sandbox",
        action="store_true",
        help="run student code without isolation (trusted notebooks only, e.g. without bubblewrap)",
    )
    p.set_defaults(func=_names_a_full_disk(_autograde))

    p = sub.add_parser("sandbox", help="without bubblewrap: open a Python in a private home to the fallback sandbox")
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    setup = actions.add_parser("setup", help="a group for the sandbox's uids, traverse-only ACLs for it (root)")
    setup.add_argument("--dry-run", action="store_true", help="print the ACL entries it would add, change nothing")
    actions.add_parser("undo", help="put back every ACL that setup changed; delete its group")
    p.set_defaults(func=_sandbox)

    p = sub.add_parser("feedback", help="HTML feedback per submission, without hidden tests")
    p.add_argument("course")
    p.add_argument("lab", help=LAB_HELP)
    p.set_defaults(func=_names_a_full_disk(_feedback))

    p = sub.add_parser("grades", help="export the gradebook: nbgrader CSV + a score histogram per lab")
    p.add_argument("course")
    p.add_argument("--csv", help="CSV path (default COURSE/grades/grades.csv; PNGs go next to it)")
    p.set_defaults(func=_names_a_full_disk(_grades))

    p = sub.add_parser("grade-one", help="grade one submission in a sandbox; write OUT/result.json + feedback.html")
    p.add_argument("--lab", required=True, help="lab id (e.g. lab1_landscape) or COURSE/LAB")
    p.add_argument("--submission", required=True, metavar="NOTEBOOK", help="the learner's .ipynb")
    p.add_argument("--out", required=True, metavar="DIR", help="folder for result.json and feedback.html")
    p.add_argument("--unsafe-no-sandbox", action="store_true",
                   help="run student code without isolation (trusted notebooks only)")
    p.set_defaults(func=_names_a_full_disk(_grade_one))

    p = sub.add_parser("export", help="a platform's grader for a course: Coursera (Docker context), Gradescope (zip)")
    platforms = p.add_subparsers(dest="platform", metavar="PLATFORM", required=True)
    coursera = platforms.add_parser("coursera", help="write the Docker context of Coursera's custom grader")
    coursera.add_argument("course")
    coursera.add_argument("out", metavar="OUT", help="an empty folder for the Docker context")
    coursera.add_argument("--part", action="append", metavar="PARTID=LAB",
                          help="Coursera's part id of a lab (repeatable; a lab not named is keyed by its name)")
    gradescope = platforms.add_parser("gradescope", help="write OUT/autograder.zip for one lab")
    gradescope.add_argument("course")
    gradescope.add_argument("lab", help=LAB_HELP)
    gradescope.add_argument("out", metavar="OUT", help="an empty folder for autograder.zip")
    for q in (coursera, gradescope):
        q.add_argument("--timeout", type=int, default=1200,
                       help="seconds the platform gives one submission (default 1200; set the platform to this)")
        q.add_argument("--memory", type=float, default=4.0, help="GB of memory the platform gives (default 4)")
        q.add_argument("--force", action="store_true", help="replace what a non-empty OUT holds")
        q.set_defaults(func=_names_a_full_disk(_export))
