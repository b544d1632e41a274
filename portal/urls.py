from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from evaluation.catalog import api as catalog_api
from evaluation.catalog import views as catalog_views
from leaderboard import charts_api, iteration_api, iteration_views, table_views
from leaderboard import exports as board_exports
from leaderboard import views as board_views
from portal import docs_pages
from portal.accounts.views import signup_page
from portal.api_errors import api_not_found
from portal.throttles import LoginThrottle, SignupThrottle, limited_posts
from submissions import api as submissions_api
from submissions import views as submissions_views

urlpatterns = [
    path("", board_views.front_page, name="home"),
    path("releases/", catalog_views.problems_page, name="problems"),
    path("releases/<int:pk>/", catalog_views.release_page, name="release"),
    # before the operator pages: "weights" is no operator's name
    path("releases/<int:pk>/weights/", board_views.public_weights_page, name="release-weights"),
    path("releases/<int:pk>/<str:operator>/", catalog_views.operator_page, name="operator"),
    path("boards/", board_views.boards_index, name="boards"),
    path("boards/<int:pk>/<str:hardware>/", board_views.board_page, name="board"),
    path("boards/<int:pk>/<str:hardware>/analysis/", board_views.analysis_page,
         name="board-analysis"),
    path("boards/<int:pk>/<str:hardware>/changes/", board_views.rank_changes_page,
         name="board-changes-page"),
    path("boards/<int:pk>/<str:hardware>/operators/<str:operator>/",
         board_views.operator_board_page, name="operator-board"),
    path("boards/<int:pk>/<str:hardware>/table/", table_views.paper_table_page,
         name="paper-table"),
    path("boards/<int:pk>/<str:hardware>/<str:board>/", board_views.board_page,
         name="board-of"),
    path("api/boards/<int:pk>/<str:hardware>/", board_exports.BoardExportApi.as_view(),
         name="board-export"),
    path("api/boards/<int:pk>/<str:hardware>/analysis/", board_exports.AnalysisExportApi.as_view(),
         name="board-analysis-export"),
    path("api/boards/<int:pk>/<str:hardware>/changes/",
         board_exports.RankChangesExportApi.as_view(), name="board-changes"),
    path("api/boards/<int:pk>/<str:hardware>/operators/<str:operator>/",
         board_exports.OperatorBoardExportApi.as_view(), name="operator-board-export"),
    path("api/boards/<int:pk>/<str:hardware>/table/", table_views.PaperTableApi.as_view(),
         name="paper-table-export"),
    path("api/boards/<int:pk>/<str:hardware>/<str:board>/",
         board_exports.NamedBoardExportApi.as_view(), name="board-export-of"),
    path("staff/boards/<int:pk>/<str:hardware>/freeze/", board_views.board_freeze_toggle,
         name="board-freeze"),
    path("staff/releases/<int:pk>/weights/", board_views.weights_page, name="weights"),
    path("staff/quarantine/", submissions_views.quarantine_page, name="quarantine"),
    path("team/", submissions_views.team_page, name="team"),
    path("submit/", submissions_views.upload_page, name="upload"),
    path("submissions/<int:pk>/", submissions_views.submission_page, name="submission"),
    path("submissions/<int:pk>/ncu/", submissions_views.submission_ncu_page,
         name="submission-ncu"),
    path("submissions/<int:pk>/share/", submissions_views.submission_share_page,
         name="submission-share"),
    # A public summary by its unguessable token (submissions/sharing.py): no sign-in.
    path("shared/<slug:token>/", submissions_views.shared_submission_page,
         name="submission-shared"),
    path("submissions/<int:pk>/compare/<int:other>/", iteration_views.submission_compare_page,
         name="submission-compare"),
    path("team/history/<str:operator>/", iteration_views.operator_history_page,
         name="operator-history"),
    path("accounts/login/", limited_posts(LoginThrottle, "sign-in attempts")(
        auth_views.LoginView.as_view()), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("accounts/signup/", limited_posts(SignupThrottle, "sign-ups")(signup_page),
         name="signup"),
    # Before admin/: the admin's own sign-in shares the limit (and the counts) of the one above.
    path("admin/login/", limited_posts(LoginThrottle, "sign-in attempts")(admin.site.login),
         name="admin-login"),
    path("admin/", admin.site.urls),
    path("docs/", docs_pages.docs_page, name="docs-index"),
    path("docs/screenshots/<str:name>", docs_pages.docs_screenshot, name="docs-screenshot"),
    path("docs/<slug:name>/", docs_pages.docs_page, name="docs"),
    path("api/releases/", catalog_api.ReleaseListApi.as_view(), name="api-releases"),
    path("api/capability/", catalog_api.CapabilityApi.as_view(), name="api-capability"),
    path("api/releases/<int:pk>/operators/", catalog_api.ReleaseOperatorsApi.as_view(),
         name="api-operators"),
    path("api/releases/<int:pk>/bundle/", catalog_api.BundleApi.as_view(), name="api-bundle"),
    path("api/releases/<int:pk>/operators/<str:operator>/",
         catalog_api.OperatorProblemApi.as_view(), name="api-operator-problem"),
    path("api/submissions/", submissions_api.SubmissionListCreateApi.as_view(),
         name="api-submissions"),
    path("api/submissions/<int:pk>/", submissions_api.SubmissionDetailApi.as_view(),
         name="api-submission"),
    path("api/submissions/<int:pk>/charts/", charts_api.SubmissionChartsApi.as_view(),
         name="api-submission-charts"),
    path("api/submissions/<int:pk>/profile/", submissions_api.SubmissionProfileApi.as_view(),
         name="api-submission-profile"),
    path("api/submissions/<int:pk>/ncu/", submissions_api.SubmissionNcuApi.as_view(),
         name="api-submission-ncu"),
    path("api/submissions/<int:pk>/cancel/", submissions_api.SubmissionCancelApi.as_view(),
         name="api-submission-cancel"),
    path("api/submissions/<int:pk>/compare/<int:other>/",
         iteration_api.SubmissionCompareApi.as_view(), name="api-submission-compare"),
    path("api/team/history/<str:operator>/", iteration_api.OperatorHistoryApi.as_view(),
         name="api-operator-history"),
    path("api/quota/", submissions_api.QuotaApi.as_view(), name="api-quota"),
    path("api/token/", submissions_api.TokenApi.as_view(), name="api-token"),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    # Last: API addresses no route above matches (e.g. /api/submissions/-1/) answer JSON. Only
    # paths ending in a slash, so CommonMiddleware still redirects /api/quota to /api/quota/.
    re_path(r"^api/(?P<path>[\s\S]*/)\Z", api_not_found, name="api-not-found"),
]
