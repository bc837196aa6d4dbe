# One fetch rule. Its jobs run on the submitting machine (cluster nodes often have no internet)
# and write a small JSON record of what they found. Offline they fail at once with the URL
# and the folder to put the files in by hand. The quick scale needs none of them: it uses
# scikit-learn's bundled digits wherever a paper uses MNIST.

# Every dataset a rule fetches: torchvision's, Tiny ImageNet (its official zip, MD5-checked,
# validation images one folder per class) and ImageNet (RP-T8, optional), which cannot be downloaded
# by a rule: its job checks that it was put under data_dir/imagenet/{train,val}/<class>/ by hand and
# says where to put it otherwise.
TORCHVISION_DATASETS = ["mnist", "cifar10", "cifar100"]
FETCHED = TORCHVISION_DATASETS + ["tiny_imagenet", "imagenet"]


rule fetch_dataset:
    """Fetch MNIST, CIFAR-10/100 or Tiny ImageNet, or check ImageNet's copy (offline: say where to put the files)."""
    output:
        f"{DATA}/fetched/{{dataset}}.json",
    wildcard_constraints:
        dataset=one_of(FETCHED),
    log:
        log_file("datasets/{dataset}"),
    localrule: True
    conda:
        "../../envs/datasets.yaml"
    script:
        "../scripts/fetch_dataset.py"


rule datasets:
    """Every dataset the paper scale needs: MNIST, CIFAR-10, CIFAR-100, Tiny ImageNet."""
    input:
        lambda w: [f for name in TORCHVISION_DATASETS + ["tiny_imagenet"] for f in dataset_input(name)],
    localrule: True
