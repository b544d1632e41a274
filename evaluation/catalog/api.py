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
from evaluation.catalog.models import HardwareProfile, Operator, Release
from evaluation.catalog.selectors import (
    bundle_zip,
    newest_versions,
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
        data = [{"name": op.name, "shape_count": op.shape_count, "files": public_files(op)}
                for op in operators_public(release)]
        return Response(OperatorOut(data, many=True).data)


class BundleApi(APIView):
    """A zip of reference.py, input.py and shapes.json for one operator or the release."""

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
