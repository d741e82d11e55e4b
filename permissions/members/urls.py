"""The pages of setting up, joining and managing a team (the users.* and invites.* API is in permissions.urls)."""

from django.urls import path

from permissions.members import pages

urlpatterns = [
    path("setup", pages.setup_page, name="setup"),
    path("invite/<str:token>", pages.invite_page, name="invite"),
    path("team/members", pages.members_page, name="members"),
    path("team/members/invite", pages.invite_create_page, name="members-invite"),
    path("team/members/invites/<uuid:invite_id>/revoke", pages.invite_revoke_page, name="members-invite-revoke"),
    path("team/members/<uuid:user_id>/role", pages.member_role_page, name="members-role"),
    path("team/members/<uuid:user_id>/deactivate", pages.member_deactivate_page, name="members-deactivate"),
    path("team/members/<uuid:user_id>/activate", pages.member_activate_page, name="members-activate"),
]
