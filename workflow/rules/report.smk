# The PDF report: verdicts of every paper's claims, per-paper sections, the head-to-head,
# seaborn figures and CSV tables, typeset by Typst.


from psml_core.report.html import PDF_CATEGORY


localrules:
    report,


# The validation table the config points to (report.validation), an input when set: a path
# relative to the working directory, else to the folder holding the config (a deployment that
# uses the workflow's own config/ finds the workflow's tables).
VALIDATION = (config.get("report") or {}).get("validation")
if VALIDATION and not Path(VALIDATION).is_file():
    _beside = Path(CONFIG_DIR).parent / VALIDATION
    VALIDATION = str(_beside) if _beside.is_file() else VALIDATION
if VALIDATION and not Path(VALIDATION).is_file():
    sys.exit(
        f"error: key 'report.validation': {VALIDATION!r} does not exist; measure one with "
        "`psml validate` (as root) or remove the key"
    )


rule report:
    input:
        runs=layout.path(layout.RUNS_TABLE, tier=TIER),
        aggregate=layout.path(layout.AGGREGATE, tier=TIER),
        claims=layout.path(layout.CLAIMS, tier=TIER),
        regime_map=layout.path(layout.REGIME_MAP, tier=TIER),
        papers=paper_files,
        metrics=all_metrics,
        sparsity=all_sparsity,
        partition=all_partitions,
        listed_metrics=layout.path(layout.SPEC_LIST, tier=TIER, name="metrics"),
        listed_partitions=layout.path(layout.SPEC_LIST, tier=TIER, name="partitions"),
        config=layout.path(layout.CONFIG, tier=TIER),
        validation=[VALIDATION] if VALIDATION else [],
    output:
        # Snakemake's HTML report lists its categories sorted by name: they are numbered in
        # reading order (the PDF, the verdicts with their reasons, each paper, the rest).
        pdf=report(
            layout.path(layout.REPORT_PDF, tier=TIER),
            caption="../report/report.rst",
            category=PDF_CATEGORY,
            subcategory="PDF",
        ),
        # The PDF's figures (SVG, with PNG copies) and tables (CSV, rendered as HTML): one
        # category per part of the PDF that has any (psml_core/report/html.py).
        figures=report(
            directory(layout.path(layout.REPORT_FIGURES, tier=TIER)),
            patterns=["{group}/{name}.svg"],
            caption="../report/figures.rst",
            category=figure_section,
            subcategory="figures",
            labels=figure_labels,
        ),
        tables=report(
            directory(layout.path(layout.REPORT_TABLES, tier=TIER)),
            patterns=["{group}/{name}.html"],
            caption="../report/tables.rst",
            category=table_section,
            subcategory="tables",
            labels=table_labels,
        ),
    log:
        layout.path(layout.LOG, tier=TIER, job="report"),
    benchmark:
        layout.path(layout.BENCH, tier=TIER, job="report")
    conda:
        RULE_ENV
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        papers=PAPERS_DIR,
        workdir=layout.path(layout.REPORT_WORK, tier=TIER),
        validation=f"--validation {shlex.quote(VALIDATION)}" if VALIDATION else "",
    shell:
        "psml report --runs {input.runs} --aggregate {input.aggregate} "
        "--claims {input.claims} --papers {params.papers} "
        "--regime-map {input.regime_map} "
        "--metrics @{input.listed_metrics} --sparsity {input.sparsity} "
        "--partition @{input.listed_partitions} "
        "--experiment {input.config} --workdir {params.workdir} --out {output.pdf} "
        "{params.validation} "
        "--figures {output.figures} --tables {output.tables} "
        "> {log} 2>&1"
