"""What ``dfa publish`` and ``dfa check --published`` print: one line per result, exit 0 / 1 (cli.py's rules)."""

from __future__ import annotations

from pathlib import Path

from common.errors import DFAError


def publish(args) -> int:
    from common.grading.courses.course import courses_from_args
    from common.grading.editions.publish import publish as write

    result = write(courses_from_args(args.course), Path(args.out), repo=args.repo, force=args.force)
    print(
        f"published {len(result.notebooks)} release notebook(s), the package and a README into {result.out} "
        f"(badges open github.com/{result.repo})"
    )
    for rel in result.removed:
        print(f"removed {rel}: a previous dfa publish wrote it, this one does not")
    if result.replaced:
        print(
            f"replaced {len(result.replaced)} file(s) that no earlier dfa publish listed (--force), e.g. "
            f"{result.replaced[0]}"
        )
    if result.foreign:
        print(
            f"left alone {len(result.foreign)} file(s) in {result.out} that dfa publish did not write, e.g. "
            f"{result.foreign[0]}"
        )
    kept = [s for s in result.strips if not s.removed]
    for strip in result.strips:
        if strip.removed:
            print(f"left out {strip.reference} (reference of {'; '.join(strip.stubs)})")
    for strip in kept:
        print(
            f"KEPT {strip.reference}, the reference of {'; '.join(strip.stubs)}: its name is in "
            f"{', '.join(strip.users[:4])}{' …' if len(strip.users) > 4 else ''}"
        )
    for rel in result.salted:
        print(f"SALT in {rel}: the release notebook assigns its salt in the open")
    if kept or result.salted:
        print(
            f"dfa check --published {args.out} will fail until the labs stop using the {len(kept)} kept "
            f"reference(s) and printing salts ; the student edition is written all the same"
        )
    return 0


def check_published(args) -> int:
    from common.grading.courses.course import courses_from_args, repo_root
    from common.grading.editions import published_check, published_run
    from common.grading.editions.publish import published_repo

    if not args.published:
        raise DFAError("--execute and --lab go with --published OUT")
    if args.lab and not args.execute:
        raise DFAError("--lab chooses what --execute runs: add --execute")
    out = Path(args.published).resolve()
    courses = courses_from_args(args.course)  # what --execute runs; the check compares with every course
    pyproject = out / "pyproject.toml"
    repo = published_repo(pyproject if pyproject.is_file() else None)
    problems = published_check.check_published(out, courses_from_args(None), repo_root(), repo)
    for problem in problems:
        print(problem)
    if args.execute:
        notebooks = {}
        for course in courses:
            wanted = [course.require_lab(lab) for lab in args.lab or [] if _has_lab(course, lab)]
            for lab in course.labs():
                if not args.lab or lab in wanted:
                    notebooks[f"{course.name}/release/{lab}/{lab}.ipynb"] = course.source_notebook(lab)
        if args.lab and not notebooks:
            raise DFAError(f"no lab {', '.join(args.lab)} in {', '.join(c.name for c in courses)}")
        notebooks = {rel: src for rel, src in notebooks.items() if (out / rel).is_file()}
        ran = published_run.execute(out, notebooks)
        for problem in ran:
            print(problem)
        problems += ran
    print(f"dfa check --published: {out}, {len(problems)} problem(s)")
    return 1 if problems else 0


def _has_lab(course, lab: str) -> bool:
    try:
        course.require_lab(lab)
        return True
    except DFAError:
        return False
