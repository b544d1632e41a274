"""Public catalog API: releases, operators (public files only), bundles."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from evaluation.catalog.capability import Capability, portal_capability
from evaluation.catalog.labels import operator_labels
from evaluation.catalog.models import HardwareProfile, Operator, Release
from evaluation.catalog.selectors import (
    bundle_zip,
    newest_versions,
    operator_tolerance,
    operators_public,
    public_files,
    releases_public,
)
from portal.api_schema import errors


class ReleaseOut(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    name = serializers.CharField()
    version = serializers.IntegerField()
    dsl = serializers.CharField()
    accepted_dsls = serializers.ListField(child=serializers.CharField(), help_text=(
        "the DSLs a submission may declare (upload field dsl), the default first"))
    dsl_ratio_threshold = serializers.FloatField(
        help_text="a shape is native when this share of its device time runs in the DSL")
    operator_count = serializers.IntegerField()
    shape_count = serializers.IntegerField()
    hardware = serializers.SerializerMethodField(help_text=(
        "the hardware profiles a submission may name (upload field hardware)"))

    newest = serializers.SerializerMethodField(help_text=(
        "whether this is the newest version of its name: the one a bare name means"))
    superseded_by = serializers.SerializerMethodField(help_text=(
        "the newest version of the name, when this one is older (else null)"))
    evaluated_shapes = serializers.SerializerMethodField(help_text=(
        "how many of its public shapes this portal's jobs evaluate (its shape filter); 0: "
        "it cannot be evaluated here"))
    ranked_on = serializers.SerializerMethodField(help_text=(
        "hardware a live GPU worker serves: submissions there are timed and ranked"))
    checked_on = serializers.SerializerMethodField(help_text=(
        "hardware served only by workers in Triton's CPU interpreter: checks, never ranked"))

    @extend_schema_field(serializers.ListField(child=serializers.CharField()))
    def get_hardware(self, release: Release) -> list[str]:
        return list(self.context["hardware"])

    def get_newest(self, release: Release) -> bool:
        return bool(self.context["newest"][release.name] == release.version)

    @extend_schema_field(serializers.IntegerField(allow_null=True))
    def get_superseded_by(self, release: Release) -> int | None:
        newest = int(self.context["newest"][release.name])
        return newest if newest != release.version else None

    def get_evaluated_shapes(self, release: Release) -> int:
        return int(self.context["capability"].evaluated_shapes(release.pk))

    @extend_schema_field(serializers.ListField(child=serializers.CharField()))
    def get_ranked_on(self, release: Release) -> list[str]:
        capability: Capability = self.context["capability"]
        return sorted(capability.gpu) if capability.evaluated_shapes(release.pk) else []

    @extend_schema_field(serializers.ListField(child=serializers.CharField()))
    def get_checked_on(self, release: Release) -> list[str]:
        capability: Capability = self.context["capability"]
        return list(capability.interpreter) if capability.evaluated_shapes(release.pk) else []


class OperatorOut(serializers.Serializer[Any]):
    name = serializers.CharField()
    shape_count = serializers.IntegerField()
    files = serializers.DictField(child=serializers.CharField())
    tolerance = serializers.DictField(child=serializers.FloatField(), help_text=(
        "atol and rtol of the portal's correctness check"))


class ToleranceOut(serializers.Serializer[Any]):
    atol = serializers.FloatField()
    rtol = serializers.FloatField()


class ShapeFactsOut(serializers.Serializer[Any]):
    shape_id = serializers.CharField()
    init_kwargs = serializers.DictField(allow_null=True)
    input_kwargs = serializers.DictField()
    phase = serializers.CharField(allow_null=True)
    dev_tier = serializers.BooleanField(help_text="a tiny shape for CPU checks, never scored")
    regime = serializers.DictField(child=serializers.CharField(allow_null=True), help_text=(
        "hardware -> memory or compute: which roof bounds this shape there (as the boards "
        "split shapes); W, Q and SOL stay hidden"))


class HardwareFactsOut(serializers.Serializer[Any]):
    name = serializers.CharField()
    hbm_bytes_per_s = serializers.FloatField()
    peak_flops = serializers.DictField(child=serializers.FloatField(),
                                       help_text="precision path -> dense FLOP/s")
    launch_floor_s = serializers.FloatField(help_text="attainment is also shown against SOL "
                                            "plus this floor")


class ProblemOut(serializers.Serializer[Any]):
    """Everything a team may know about one operator before it submits."""

    release = serializers.DictField()
    operator = serializers.CharField()
    files = serializers.DictField(child=serializers.CharField(),
                                  help_text="reference.py, input.py, shapes.json")
    tolerance = ToleranceOut(help_text="the portal's correctness check, per element: "
                             "|out - ref| <= atol + rtol * |ref|")
    phase = serializers.CharField(allow_null=True)
    weight = serializers.FloatField(allow_null=True, help_text="its share of S_agg under the "
                                    "active weights")
    shapes = ShapeFactsOut(many=True)
    hardware = HardwareFactsOut(many=True)
    scoring = serializers.CharField()


SCORING = ("per shape: attainment = SOL / measured time (0 when incorrect; a fallback to "
           "PyTorch or a vendor library scores 0 under the default policy); S_op = the median "
           "attainment over the operator's shapes; SOL = max(sum of W / peak FLOP/s per "
           "precision, (Q_read + Q_write) / HBM bandwidth)")


class OperatorProblemApi(APIView):
    """One operator as a problem: its public files, tolerance, shapes with their public
    labels (phase, regime per hardware) and the hardware profiles' peaks."""

    @extend_schema(responses={200: ProblemOut, **errors(404)})
    def get(self, request: Request, pk: int, operator: str) -> Response:
        release = get_object_or_404(Release, pk=pk)
        op = get_object_or_404(Operator, release=release, name=operator)
        labels = operator_labels(op)
        profiles = list(HardwareProfile.objects.order_by("name"))
        return Response(ProblemOut({
            "release": {"id": release.pk, "name": release.name, "version": release.version,
                        "accepted_dsls": release.accepted_dsls(),
                        "dsl_ratio_threshold": release.dsl_ratio_threshold},
            "operator": op.name, "files": public_files(op), "tolerance": operator_tolerance(op),
            "phase": labels.phase, "weight": labels.weight,
            "shapes": [{"shape_id": s.shape_id, "init_kwargs": s.init_kwargs,
                        "input_kwargs": s.input_kwargs, "phase": s.phase,
                        "dev_tier": s.dev_tier,
                        "regime": dict(zip(labels.hardware, s.regimes, strict=True))}
                       for s in labels.shapes],
            "hardware": [{"name": p.name, "hbm_bytes_per_s": p.hbm_bytes_per_s,
                          "peak_flops": p.peak_flops, "launch_floor_s": p.launch_floor_s}
                         for p in profiles],
            "scoring": SCORING}).data)


class ReleaseListApi(APIView):
    @extend_schema(responses=ReleaseOut(many=True))
    def get(self, request: Request) -> Response:
        hardware = list(HardwareProfile.objects.order_by("name").values_list("name", flat=True))
        return Response(ReleaseOut(releases_public(), many=True, context={
            "hardware": hardware, "newest": newest_versions(),
            "capability": portal_capability()}).data)


class CapabilityOut(serializers.Serializer[Any]):
    summary = serializers.CharField(help_text="what this portal evaluates, in one sentence")
    workers_known = serializers.BooleanField(help_text=(
        "whether a worker announced itself lately; false: nothing is known (jobs wait)"))
    gpu = serializers.DictField(child=serializers.CharField(), help_text=(
        "hardware -> the GPU its workers time kernels on: ranked submissions go there"))
    interpreter = serializers.ListField(child=serializers.CharField(), help_text=(
        "hardware served only in Triton's CPU interpreter: checks, never ranked"))
    dsls = serializers.DictField(child=serializers.ListField(child=serializers.CharField()),
                                 help_text="hardware -> the DSLs its workers run")
    shape_filter = serializers.CharField(help_text="the deployment's ATREX_SHAPE_FILTER")
    tier = serializers.CharField(help_text="which shapes jobs evaluate, in words")
    releases = serializers.ListField(child=serializers.DictField(), help_text=(
        "releases with shapes evaluated here: id, name, version, shapes, newest"))


class CapabilityApi(APIView):
    """What this portal can evaluate, from what its workers announce (no sign-in)."""

    @extend_schema(responses=CapabilityOut)
    def get(self, request: Request) -> Response:
        capability = portal_capability()
        return Response(CapabilityOut({
            "summary": capability.summary(), "workers_known": capability.workers_known,
            "gpu": dict(capability.gpu), "interpreter": list(capability.interpreter),
            "dsls": {hw: list(names) for hw, names in capability.dsls.items()},
            "shape_filter": capability.shape_filter, "tier": capability.tier,
            "releases": [{"id": r.pk, "name": r.name, "version": r.version, "shapes": r.shapes,
                          "newest": not r.superseded} for r in capability.releases]}).data)


class ReleaseOperatorsApi(APIView):
    @extend_schema(responses={200: OperatorOut(many=True), **errors(404)})
    def get(self, request: Request, pk: int) -> Response:
        release = get_object_or_404(Release, pk=pk)
        data = [{"name": op.name, "shape_count": op.shape_count, "files": public_files(op),
                 "tolerance": operator_tolerance(op)}
                for op in operators_public(release).prefetch_related("hidden")]
        return Response(OperatorOut(data, many=True).data)


class BundleApi(APIView):
    """A zip of reference.py, input.py and shapes.json for one operator or the release, and
    `tolerances.json` (operator -> atol, rtol: the portal's correctness check)."""

    @extend_schema(
        parameters=[OpenApiParameter("operator", str, description="One operator's files only.")],
        responses={(200, "application/zip"): OpenApiTypes.BINARY, **errors(404)})
    def get(self, request: Request, pk: int) -> HttpResponse:
        release = get_object_or_404(Release, pk=pk)
        name = request.query_params.get("operator")
        operator = get_object_or_404(Operator, release=release, name=name) if name else None
        stem = f"{release.name}-v{release.version}" + (f"-{name}" if name else "")
        response = HttpResponse(bundle_zip(release, operator), content_type="application/zip")
        response["Content-Disposition"] = f'attachment; filename="{stem}.zip"'
        return response
