# The PDF report: verdicts of every paper's claims, per-paper sections, the head-to-head,
# seaborn figures and CSV tables, typeset by Typst.


localrules:
    report,


rule report:
    input:
        runs=f"results/{TIER}/runs.csv",
        aggregate=f"results/{TIER}/aggregate.csv",
        claims=f"results/{TIER}/claims.csv",
        regime_map=f"results/{TIER}/regime_map.parquet",
        papers=paper_files,
        metrics=all_metrics,
        sparsity=all_sparsity,
        partition=all_partitions,
        listed_metrics=f"results/{TIER}/specs/metrics.txt",
        listed_partitions=f"results/{TIER}/specs/partitions.txt",
        config=f"results/{TIER}/config.json",
    output:
        pdf=report(
            f"reports/{TIER}/report.pdf",
            caption="../report/report.rst",
            category="Reproduction report",
        ),
        # The PDF's figures (SVG, with PNG copies) and tables (CSV, rendered as HTML), by
        # paper: Snakemake's HTML report shows them under one category per paper section.
        figures=report(
            directory(f"reports/{TIER}/figures"),
            patterns=["{group}/{name}.svg"],
            caption="../report/figures.rst",
            category=figure_section,
            subcategory="figures",
            labels=figure_labels,
        ),
        tables=report(
            directory(f"reports/{TIER}/tables"),
            patterns=["{group}/{name}.html"],
            caption="../report/tables.rst",
            category=table_section,
            subcategory="tables",
            labels=table_labels,
        ),
    log:
        f"logs/{TIER}/report.log",
    benchmark:
        f"logs/{TIER}/bench/report.tsv"
    conda:
        RULE_ENV
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        papers=PAPERS_DIR,
        workdir=f"results/{TIER}/report",
    shell:
        "psml report --runs {input.runs} --aggregate {input.aggregate} "
        "--claims {input.claims} --papers {params.papers} "
        "--regime-map {input.regime_map} "
        "--metrics @{input.listed_metrics} --sparsity {input.sparsity} "
        "--partition @{input.listed_partitions} "
        "--experiment {input.config} --workdir {params.workdir} --out {output.pdf} "
        "--figures {output.figures} --tables {output.tables} "
        "> {log} 2>&1"
