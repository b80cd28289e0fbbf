# Data sets: build (generate, or read and parse) and write them with a SHA-256 manifest.


rule prepare:
    input:
        sources=dataset_sources,
    output:
        **data_files(wild(layout.DATA)),
    log:
        layout.wildcards(layout.LOG, tier=TIER, job="prepare/{dataset}"),
    benchmark:
        layout.wildcards(layout.BENCH, tier=TIER, job="prepare/{dataset}")
    conda:
        RULE_ENV
    threads: 1
    resources:
        mem_mb=4000,
        runtime=30,
    params:
        spec=dataset_json,
        out_dir=manifest_dir,
    shell:
        "psml prepare --spec {params.spec:q} --out {params.out_dir} > {log} 2>&1"


rule hash:
    input:
        unpack(prepared),
    output:
        **data_files(wild(layout.HASHED)),
    log:
        layout.wildcards(layout.LOG, tier=TIER, job="hash/{dataset}/{hashing}/seed{seed}"),
    benchmark:
        layout.wildcards(layout.BENCH, tier=TIER, job="hash/{dataset}/{hashing}/seed{seed}")
    conda:
        RULE_ENV
    threads: 1
    resources:
        mem_mb=4000,
        runtime=30,
    params:
        data_dir=parent_dir,
        hashing=hashing_json,
        out_dir=manifest_dir,
    shell:
        "psml hash --data {params.data_dir} --hashing {params.hashing:q} --seed {wildcards.seed} "
        "--out {params.out_dir} > {log} 2>&1"
