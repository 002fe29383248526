"""An installed distribution's name and version, read from its metadata's header lines alone."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

from harness.distribution_names import name_and_version, normalized


def test_every_installed_distribution_reads_as_its_parsed_metadata_reads() -> None:
    dists = list(metadata.distributions())
    assert len(dists) > 20  # the project's own environment: torch, numpy, pydantic, ...
    for dist in dists:
        assert name_and_version(dist) == (dist.metadata["Name"] or "", dist.version or ""), dist


def test_a_description_naming_another_package_after_the_headers_is_not_read_as_the_name(tmp_path: Path) -> None:
    info = tmp_path / "acme_models-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme_models\nVersion: 1.0\nSummary: models\n\n"
                                   "Name: not-this\nVersion: 9.9\n")
    assert name_and_version(metadata.PathDistribution(info)) == ("acme_models", "1.0")
    egg = tmp_path / "acme.egg-info"
    egg.mkdir()
    (egg / "PKG-INFO").write_text("Metadata-Version: 1.0\nName: Acme.Models\nVersion: 0.9\n")
    assert name_and_version(metadata.PathDistribution(egg)) == ("Acme.Models", "0.9")
    assert normalized("Acme.Models") == normalized("acme_models") == "acme-models"
    assert name_and_version(metadata.PathDistribution(tmp_path / "none.dist-info")) == ("", "")
