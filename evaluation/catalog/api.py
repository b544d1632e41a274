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

from evaluation.catalog.models import HardwareProfile, Operator, Release
from evaluation.catalog.selectors import bundle_zip, operators_public, public_files, releases_public
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

    @extend_schema_field(serializers.ListField(child=serializers.CharField()))
    def get_hardware(self, release: Release) -> list[str]:
        return list(self.context["hardware"])


class OperatorOut(serializers.Serializer[Any]):
    name = serializers.CharField()
    shape_count = serializers.IntegerField()
    files = serializers.DictField(child=serializers.CharField())


class ReleaseListApi(APIView):
    @extend_schema(responses=ReleaseOut(many=True))
    def get(self, request: Request) -> Response:
        hardware = list(HardwareProfile.objects.order_by("name").values_list("name", flat=True))
        return Response(ReleaseOut(releases_public(), many=True,
                                   context={"hardware": hardware}).data)


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
