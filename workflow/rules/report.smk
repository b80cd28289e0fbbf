# The PDF report: seaborn figures, CSV tables, typeset by Typst.


localrules:
    report,


rule report:
    input:
        runs=f"results/{TIER}/runs.csv",
        metrics=all_metrics,
        sparsity=all_sparsity,
        partition=all_partitions,
    output:
        report(
            "reports/report.pdf",
            caption="../report/report.rst",
            category="Reproduction report",
        ),
    log:
        f"logs/{TIER}/report.log",
    benchmark:
        f"logs/{TIER}/bench/report.tsv"
    conda:
        "../envs/psml.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        experiment=experiment_json,
        workdir=f"results/{TIER}/report",
    shell:
        "psml report --runs {input.runs} --metrics {input.metrics} "
        "--sparsity {input.sparsity} --partition {input.partition} "
        "--experiment {params.experiment:q} --workdir {params.workdir} --out {output} "
        "> {log} 2>&1"
