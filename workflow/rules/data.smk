# Data sets: build (generate, or read and parse) and write them with a SHA-256 manifest.


rule prepare:
    input:
        sources=dataset_sources,
    output:
        data=f"data/{TIER}/{{dataset}}/data.npz",
        manifest=f"data/{TIER}/{{dataset}}/manifest.json",
    log:
        f"logs/{TIER}/prepare/{{dataset}}.log",
    benchmark:
        f"logs/{TIER}/bench/prepare/{{dataset}}.tsv"
    conda:
        "../envs/psml.yaml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=30,
    params:
        spec=dataset_json,
        out_dir=manifest_dir,
    shell:
        "psml prepare --spec {params.spec:q} --out {params.out_dir} > {log} 2>&1"
