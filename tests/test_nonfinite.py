"""No NaN or inf judged in silence: a table's writer refuses them outside the columns its experiment
declares (``catalogue.undefined``), a claim whose rows hold undeclared ones is "invalid" and says how
many, and a figure says in a note how many values it could not draw, and why."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import ROOT, copy_build, snakemake
from reluinit.pipeline import catalogue, jobs, steps
from reluinit.report import claims, plotting

NAN, INF = float("nan"), float("inf")


def test_nonfinite_counts_nan_and_inf_per_numeric_column():
    t = pd.DataFrame({"a": [1.0, NAN, INF, -INF], "b": [1, 2, 3, 4], "c": ["x", None, "y", "z"],
                      "d": [True, False, True, False]})
    assert jobs.nonfinite(t) == {"a": "1 NaN, 2 inf"}
    assert jobs.nonfinite(t, ["b"]) == {}
    assert jobs.nonfinite(t, rows=t.index[:2]) == {"a": "1 NaN"}


def test_a_stacked_tables_blanks_are_not_counted_but_a_hole_in_a_measured_kind_is():
    # TG-F6's shape: a run's epochs (test_loss, no growth) beside its lines (growth, no test_loss)
    t = pd.DataFrame({"kind": ["epoch", "epoch", "line", "line"], "test_loss": [0.5, 0.4, NAN, NAN],
                      "growth": [NAN, NAN, 1.2, 1.1]})
    assert jobs.nonfinite(t) == {}
    t.loc[3, "growth"] = NAN  # a line whose growth is missing: counted
    assert jobs.nonfinite(t) == {"growth": "1 NaN"}
    assert jobs.nonfinite(t.drop(columns="kind")) == {"test_loss": "2 NaN", "growth": "3 NaN"}  # no kinds: all count
    empty = pd.DataFrame({"depth": [NAN, NAN], "acc": [0.9, 0.8]})  # a setting these runs do not have
    assert jobs.nonfinite(empty) == {}
    assert jobs.nonfinite(empty.assign(acc=[INF, INF])) == {"acc": "2 inf"}  # inf is never a blank


def test_the_writer_refuses_an_undeclared_nan_naming_the_column_and_the_fix(tmp_path):
    out = tmp_path / "out" / "quick" / "OP" / "OP-F1" / "part.csv"  # a results folder of its own
    t = pd.DataFrame({"layer": [1, 2, 3], "act_ratio": [1.0, NAN, 0.9]})
    with pytest.raises(jobs.NotFinite) as err:
        jobs.check_finite(t, "OP-F1", catalogue.undefined("OP-F1"), out)
    msg = str(err.value)
    assert "OP-F1" in msg and "1 NaN in column act_ratio" in msg and "nothing was written" in msg
    assert msg.endswith(f"`snakemake {out} --force --cores 1 --config scale=quick results={tmp_path / 'out'}`")
    jobs.check_finite(t.fillna(1.0), "OP-F1", catalogue.undefined("OP-F1"), out)  # finite: written


def test_declared_columns_pass_with_their_meaning_and_training_history_blanks_too():
    declared = catalogue.undefined("EP-F2")
    assert "input layer" in declared["growth"]
    jobs.check_finite(pd.DataFrame({"layer": [0, 1], "growth": [NAN, 1.3]}), "EP-F2", declared, "x.csv")
    with pytest.raises(jobs.NotFinite, match="1 inf in column growth"):  # declared for TG-F2, not for OP-F1
        jobs.check_finite(pd.DataFrame({"growth": [INF]}), "OP-F1", catalogue.undefined("OP-F1"), "x.csv")
    trains = catalogue.undefined("EP-F7")  # the row before training has no train loss
    assert {"lr", "train_loss", "train_acc"} <= set(trains) and "test_acc" not in trains
    jobs.check_finite(pd.DataFrame({"epoch": [0, 1], "train_loss": [NAN, 0.3], "test_acc": [0.1, 0.9]}), "EP-F7",
                      trains, "x.csv")
    with pytest.raises(jobs.NotFinite, match="test_acc"):
        jobs.check_finite(pd.DataFrame({"epoch": [0, 1], "test_acc": [0.1, NAN]}), "EP-F7", trains, "x.csv")


def test_every_declared_column_has_a_meaning():
    for exp, e in catalogue.ENTRIES.items():
        for col in e.undefined:
            assert catalogue.UNDEFINED[col].strip(), (exp, col)


def _claim(**kw):
    base = dict(id="T-1", paper="OP", place="here", claim="ratio about 1", table="OP-F1",
                columns=["layer", "act_ratio"], measure="t.act_ratio.mean()", expect="1 ± 0.1")
    return claims.Claim(**{**base, **kw})


def test_a_claim_over_an_undeclared_nan_is_invalid_and_counts_it():
    t = pd.DataFrame({"layer": [1, 2, 3, 4], "act_ratio": [1.0, 1.0, NAN, INF]})
    row = claims.evaluate(_claim(), t, "quick")
    assert row["verdict"] == claims.INVALID and np.isnan(row["measured"])
    assert row["note"].startswith("invalid: 1 NaN, 1 inf in column act_ratio")
    # the same rows without the bad ones are judged (pandas alone would have judged 1.0 here)
    assert claims.evaluate(_claim(where="layer <= 2"), t, "quick")["verdict"] == claims.REPRODUCED
    card = pd.DataFrame([row])
    assert claims.INVALID in claims.summary(card).columns  # counted, not lost from the summary


def test_a_measured_column_with_no_value_at_all_is_counted_not_taken_for_unmeasured(tmp_path):
    """An OP-F1 table whose act_ratio is NaN in every row was sealed, drawn with no note, and
    `(t.act_ratio > 2).mean()` judged "reproduced" (0.0): a column empty throughout was read as a
    setting its runs do not have. Only the declared settings (``catalogue.UNSET``) are now."""
    t = pd.DataFrame({"layer": [1, 2, 3], "act_ratio": [NAN, NAN, NAN]})
    assert jobs.nonfinite(t) == {"act_ratio": "3 NaN"}
    assert jobs.nonfinite(t.assign(kind="line")) == {"act_ratio": "3 NaN"}  # one kind, empty throughout
    with pytest.raises(jobs.NotFinite, match="3 NaN in column act_ratio"):
        jobs.check_finite(t, "OP-F1", catalogue.undefined("OP-F1"), tmp_path / "results" / "quick" / "OP-F1.csv")
    row = claims.evaluate(_claim(measure="(t.act_ratio > 2).mean()", expect="<= 0.1"), t, "quick")
    assert row["verdict"] == claims.INVALID and row["note"].startswith("invalid: 3 NaN in column act_ratio"), row
    rp = pd.DataFrame({"depth": [NAN, NAN], "setup": [NAN, NAN], "test_acc": [0.9, 0.8]})  # RP-T5's convnets
    assert {"depth", "setup"} <= catalogue.UNSET and jobs.nonfinite(rp) == {}
    jobs.check_finite(rp, "RP-T5", catalogue.undefined("RP-T5"), "x.csv")


def test_a_claim_over_a_declared_nan_is_judged_and_says_what_it_left_out():
    t = pd.DataFrame({"layer": [0, 1, 2], "growth": [NAN, 1.5, 1.7]})
    claim = _claim(paper="EP", table="EP-F2", columns=["layer", "growth"], measure="t.growth.mean()",
                   expect="1.6 ± 0.05")
    row = claims.evaluate(claim, t, "quick")
    assert row["verdict"] == claims.REPRODUCED and row["measured"] == pytest.approx(1.6)
    assert "the rows read hold 1 NaN in growth (no earlier length" in row["note"]
    t.loc[1, "growth"] = 9.0
    assert claims.evaluate(claim, t, "quick")["verdict"] == claims.NOT_REPRODUCED


def test_a_figure_says_how_many_values_it_could_not_draw_and_why():
    t = pd.DataFrame({"layer": [0, 1, 2, 0, 1, 2], "growth": [NAN, 1.5, INF, NAN, 1.4, 1.6],
                      "length_ratio": [NAN, 1.5, 1.6, NAN, 1.4, 1.6]})
    note = steps.undrawn(t, catalogue.undefined("EP-F13"))
    assert note.startswith("Not drawn: 2 NaN, 1 inf in growth (no earlier length: the input layer")
    assert "; 2 NaN in length_ratio (no earlier length:" in note
    assert steps.undrawn(t.fillna(1.0).replace(INF, 1.0), catalogue.undefined("EP-F13")) == ""
    fig, (ax,) = plotting.panels(1)
    ax.plot(t["layer"], t["growth"])
    plotting.footnote(fig, note)
    assert any(x.get_text().startswith("Not drawn: 2 NaN") for x in fig.texts)
    assert plotting.layout_problems(fig) == []  # the note fits the picture


Q = Path("results/quick")


def _last(run) -> str:
    return [line for line in (run.stdout + run.stderr).splitlines() if line.strip()][-1]


@pytest.mark.workflow
def test_on_a_build_a_nan_makes_a_claim_invalid_a_table_unwritten_and_a_claims_typo_ends_the_run_with_its_fix(
        tiny_build, tmp_path):
    wf = copy_build(tiny_build, tmp_path / "wf")
    table, part = wf / Q / "OP/OP-F1.csv", wf / Q / "OP/OP-F1/all-parts.csv"
    # A NaN in a table sealed as it stands (a table written before this check, or edited and resealed):
    # OP-1 reads it at the widest He net and says so instead of judging the other rows.
    t = pd.read_csv(table)
    widest = t.index[(t["init"] == "he_fan_out") & (t["width"] == t["width"].max())]
    t.loc[widest[3], "act_ratio"] = NAN
    jobs.write_table(t, table)
    run = snakemake(str(Q / "claims/OP.csv"), "--cores", "1", "--config", "scale=quick", cwd=wf)
    assert run.returncode == 0, run.stderr[-3000:]
    card = claims.read(wf / Q / "claims/OP.csv").set_index("claim")
    assert card.loc["OP-1", "verdict"] == claims.INVALID
    assert card.loc["OP-1", "note"].startswith("invalid: 1 NaN in column act_ratio, which OP-F1 does not declare")
    # A claim naming a column its table lacks: the run's last words name the claim, the table, its columns.
    text = (wf / "claims.yaml").read_text()
    (wf / "claims.yaml").write_text(text.replace("columns: [init, width, layer, act_ratio, sample]",
                                                 "columns: [init, width, layer, act_ratio, sample, act_ration]", 1))
    run = snakemake(str(Q / "claims/OP.csv"), "--cores", "1", "--config", "scale=quick", cwd=wf)
    assert run.returncode != 0
    assert _last(run).startswith("claim OP-1: table OP-F1 has no column(s) act_ration; its columns are "), _last(run)
    assert _last(run).endswith("correct the claim's columns in claims.yaml")
    # The same NaN in the part the table is made of: the figure job writes nothing and says why, last.
    p = pd.read_csv(part)
    p.loc[3, "act_ratio"] = NAN
    jobs.write_table(p, part)
    run = snakemake("op_f1", "--force", "--cores", "1", "--config", "scale=quick", cwd=wf)
    assert run.returncode != 0
    assert _last(run).startswith("OP-F1: the rows for results/quick/OP/OP-F1.csv hold values that are not numbers "
                                 "(1 NaN in column act_ratio)"), _last(run)
    assert _last(run).endswith("`snakemake results/quick/OP/OP-F1.csv --force --cores 1 --config scale=quick`")
    assert not table.exists()


def test_a_nan_from_an_absurd_setting_names_its_config_key():
    """``sigma_w``, ``half_side`` or ``lr`` at 1e300 ended in "fix the measurement", naming no key."""
    t = pd.DataFrame({"layer": [1, 2], "act_ratio": [1.0, NAN]})
    with pytest.raises(jobs.NotFinite) as err:
        jobs.check_finite(t, "OP-F1", catalogue.undefined("OP-F1"), "x.csv",
                          settings={"widths": [100, 500], "sigma_w": 1e300, "init": {"lr": -2e16}}, scale="paper")
    assert ("the config sets experiments.OP-F1.paper.sigma_w = 1e+300, experiments.OP-F1.paper.init.lr = -2e+16, far "
            "beyond any value the papers use: a likely cause (correct it in config.yaml or your --configfile)") in str(err.value)
    with pytest.raises(jobs.NotFinite) as err:
        jobs.check_finite(t, "OP-F1", catalogue.undefined("OP-F1"), "x.csv", settings={"sigma_w": 2.0}, scale="paper")
    assert "the config sets" not in str(err.value)


def test_a_job_that_fails_under_an_absurd_setting_names_its_config_key(tmp_path):
    """``sigma_w: 1.0e+300`` passes the schema (a finite number) and TG-F1's job then fails inside
    torch (an SVD of non-finite values), a traceback naming no key. The line the run's final
    words repeat names the setting, the fix and the rerun; a job in a separate process, as
    Snakemake runs it (``jobs.start`` takes over logging and the excepthook)."""
    code = f"""
import yaml
from reluinit.pipeline import plan, steps
from reluinit.pipeline.config import settings
config = yaml.safe_load(open("config.yaml"))
config["results"] = {str(tmp_path / "results")!r}
s = {{**settings(config, "TG-F1", "quick"), "sigma_w": 1e300}}
job = next(iter(plan.measure_jobs(config, "TG-F1", "quick")))
steps.measure("TG-F1", job, s, [], {str(tmp_path / "results/quick/TG/TG-F1.csv")!r}, [],
              {str(tmp_path / "job.log")!r}, config=config, scale="quick", device="cpu", threads=1)
"""
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode != 0
    todo = [line for line in (tmp_path / "job.log").read_text().splitlines() if "what to do: " in line]
    assert len(todo) == 1, todo
    assert todo[0].split("what to do: ")[1].startswith("TG-F1: the job failed (_LinAlgError: ")
    assert ("; the config sets experiments.TG-F1.quick.sigma_w = 1e+300, far beyond any value the papers use: a "
            "likely cause (correct it in config.yaml or your --configfile), then rerun `snakemake ") in todo[0]

